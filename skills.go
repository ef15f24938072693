package mcphandler

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/mcphandler/mcphandler/internal/jsonrpc"
)

// Skills, the extension io.modelcontextprotocol/skills (SEP-2640), served
// from one per-request hook, Config.ListSkills:
//
//   - skills/list and skills/get answer the skills the caller may see
//     (the hook's answer for the request, then MinRole and Scopes, as for
//     tools); each entry carries the frontmatter of its SKILL.md and the
//     complete manifest of its files, each with its sha256 digest and size.
//   - resources/read serves every skill:// file of a visible skill, with
//     the bytes the manifest describes; resources/list lists each visible
//     SKILL.md; resources/directory/read lists a skill directory's direct
//     children (subdirectories as inode/directory).
//   - A skill the caller may not see answers every path exactly like one
//     that does not exist.
//
// See https://modelcontextprotocol.io/seps/2640-skills-extension.

// skillsExtensionID is the identifier of the skills extension.
const skillsExtensionID = "io.modelcontextprotocol/skills"

// Limits of the skills extension. A skill past MaxSkillFiles or
// MaxSkillBytes, or with an invalid name or file path, is left out of the
// caller's skills and logged once (the host's hook is at fault); a URI
// longer than MaxSkillURIBytes answers like an unknown one.
const (
	MaxSkillFiles    = 512      // files of one skill, SKILL.md included
	MaxSkillBytes    = 16 << 20 // bytes of one skill's files, SKILL.md included
	MaxSkillURIBytes = 1024     // bytes of a skill:// URI a client sends
)

// Skill is an Agent Skill served at skill://<Name>/SKILL.md. Its SKILL.md
// is generated: YAML frontmatter with name and description, then Body, so
// the frontmatter of the manifest entry always equals the file's.
type Skill struct {
	// Name is 1-64 lowercase letters, digits and hyphens, with no leading,
	// trailing or doubled hyphen.
	Name        string
	Description string // required, non-empty
	Body        string // the markdown after the frontmatter
	// Files are the other files of the skill, at most MaxSkillFiles-1.
	Files []SkillFile
	// MinRole is the least role that may see the skill.
	MinRole string
	// Scopes are the OAuth scopes a caller's token needs to see it.
	Scopes []string
}

// SkillFile is one file of a skill, at skill://<skill>/<Path>.
type SkillFile struct {
	// Path is relative to the skill directory: segments of letters,
	// digits, '.', '_' and '-' separated by '/', none "." or "..", not
	// "SKILL.md".
	Path     string
	MimeType string // defaults to text/plain, or application/octet-stream for non-UTF-8
	Content  []byte
}

// ListSkillsFunc returns the skills the caller in ctx may see. It is
// called once per skills request; it must be safe for concurrent use.
type ListSkillsFunc func(ctx context.Context) ([]Skill, error)

var (
	skillNameRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,62}[a-z0-9])?$`)
	skillSegRE  = regexp.MustCompile(`^[A-Za-z0-9._-]{1,128}$`)
)

const skillScheme = "skill://"

// servedSkill is a Skill with its files resolved: SKILL.md first.
type servedSkill struct {
	uri, name string
	front     json.RawMessage
	files     []servedFile
}

type servedFile struct {
	uri, path, mime string
	content         []byte
}

type manifestEntry struct {
	URI    string `json:"uri"`
	Digest string `json:"digest"`
	Size   int    `json:"size"`
}

type skillEntry struct {
	URI         string          `json:"uri"`
	Frontmatter json.RawMessage `json:"frontmatter"`
	Resources   []manifestEntry `json:"resources"`
}

// serveSkill checks s and renders its SKILL.md.
func serveSkill(s *Skill) (*servedSkill, error) {
	if !skillNameRE.MatchString(s.Name) || strings.Contains(s.Name, "--") {
		return nil, fmt.Errorf("skill name %q is not a valid skill name", s.Name)
	}
	if s.Description == "" {
		return nil, fmt.Errorf("skill %q has no description", s.Name)
	}
	if len(s.Files)+1 > MaxSkillFiles {
		return nil, fmt.Errorf("skill %q has %d files, more than %d", s.Name, len(s.Files)+1, MaxSkillFiles)
	}
	desc, _ := json.Marshal(s.Description) // a JSON string is a YAML double-quoted scalar
	md := "---\nname: " + s.Name + "\ndescription: " + string(desc) + "\n---\n" + s.Body
	front, _ := json.Marshal(map[string]string{"name": s.Name, "description": s.Description})
	dir := skillScheme + s.Name
	ss := &servedSkill{uri: dir + "/SKILL.md", name: s.Name, front: front}
	ss.files = append(ss.files, servedFile{uri: ss.uri, path: "SKILL.md", mime: "text/markdown", content: []byte(md)})
	total := len(md)
	seen := map[string]bool{"SKILL.md": true}
	for _, f := range s.Files {
		if !validSkillPath(f.Path) || seen[f.Path] {
			return nil, fmt.Errorf("skill %q: file path %q is invalid or repeated", s.Name, f.Path)
		}
		seen[f.Path] = true
		total += len(f.Content)
		mime := f.MimeType
		if mime == "" {
			mime = "text/plain"
			if !utf8.Valid(f.Content) {
				mime = "application/octet-stream"
			}
		}
		ss.files = append(ss.files, servedFile{uri: dir + "/" + f.Path, path: f.Path, mime: mime, content: f.Content})
	}
	if total > MaxSkillBytes {
		return nil, fmt.Errorf("skill %q holds %d bytes, more than %d", s.Name, total, MaxSkillBytes)
	}
	return ss, nil
}

func validSkillPath(p string) bool {
	if p == "" || p == "SKILL.md" {
		return false
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == "." || seg == ".." || !skillSegRE.MatchString(seg) {
			return false
		}
	}
	return true
}

// entry is the manifest of ss served to tenant, its digests from dc.
func (ss *servedSkill) entry(dc *digestCache, tenant string) skillEntry {
	e := skillEntry{URI: ss.uri, Frontmatter: ss.front, Resources: make([]manifestEntry, len(ss.files))}
	for i, f := range ss.files {
		e.Resources[i] = manifestEntry{URI: f.uri, Digest: dc.digest(tenant, f.content), Size: len(f.content)}
	}
	return e
}

// visibleSkills returns the caller's skills, checked and rendered. A
// skill the handler cannot serve (see serveSkill), and every skill of a
// name the hook lists more than once, is left out and logged once
// (badDefinition): one bad definition never fails the caller's list.
func (c *catalog) visibleSkills(ctx context.Context, id Identity) ([]*servedSkill, error) {
	list, err := c.cfg.ListSkills(ctx)
	if err != nil {
		return nil, err
	}
	list = gate(c, list, id, func(s *Skill) gates { return gates{s.MinRole, s.Scopes} })
	out := make([]*servedSkill, 0, len(list))
	var names map[string]int // of the skills served, when a name may repeat
	if len(list) > 1 {
		names = make(map[string]int, len(list))
	}
	for i := range list {
		ss, err := serveSkill(&list[i])
		if err != nil {
			c.badDefinition(ctx, skillDef, list[i].Name, err.Error())
			continue
		}
		if names != nil {
			names[ss.name]++
		}
		out = append(out, ss)
	}
	if len(names) == len(out) {
		return out, nil
	}
	return slices.DeleteFunc(out, func(ss *servedSkill) bool { // out is ours
		if n := names[ss.name]; n > 1 {
			c.badDefinition(ctx, skillDef, ss.name, "the name of "+strconv.Itoa(n)+" skills")
			return true
		}
		return false
	}), nil
}

// skillOf returns the visible skill that uri is in, if any.
func skillOf(skills []*servedSkill, uri string) *servedSkill {
	if len(uri) > MaxSkillURIBytes || !strings.HasPrefix(uri, skillScheme) {
		return nil
	}
	name, _, _ := strings.Cut(uri[len(skillScheme):], "/")
	for _, ss := range skills {
		if ss.name == name {
			return ss
		}
	}
	return nil
}

func (c *catalog) hasSkills() bool { return c.cfg.ListSkills != nil }

func (c *catalog) listSkills(rq *request, m *jsonrpc.Message) {
	skills, err := c.visibleSkills(rq.ctx, rq.id)
	if err != nil {
		rq.hookFailed(m, "ListSkills", err)
		return
	}
	entries := make([]skillEntry, len(skills))
	for i, ss := range skills {
		entries[i] = ss.entry(&c.skillDigests, rq.id.Tenant)
	}
	listPage(c, rq, m, "skills", entries)
}

// errUnknownSkill is the one answer of skills/get for a skill that does not
// exist or that the caller may not see.
func errUnknownSkill(uri string) *jsonrpc.Error {
	data, _ := json.Marshal(map[string]string{"uri": uri})
	return rpcErrorData(CodeInvalidParams, "Invalid params: unknown skill", data)
}

func (c *catalog) getSkill(rq *request, m *jsonrpc.Message) {
	p, ok := rq.uriParams(m)
	if !ok {
		return
	}
	skills, err := c.visibleSkills(rq.ctx, rq.id)
	if err != nil {
		rq.hookFailed(m, "ListSkills", err)
		return
	}
	ss := skillOf(skills, p.URI)
	if ss == nil || ss.uri != p.URI {
		rq.fail(m.ID, errUnknownSkill(p.URI))
		return
	}
	b, _ := json.Marshal(map[string]any{"skill": ss.entry(&c.skillDigests, rq.id.Tenant)})
	rq.reply(m.ID, b)
}

// readSkillFile answers a resources/read of a skill:// URI; it reports
// whether uri was one.
func (c *catalog) readSkillFile(rq *request, m *jsonrpc.Message, uri string) bool {
	if !c.hasSkills() || !strings.HasPrefix(uri, skillScheme) {
		return false
	}
	skills, err := c.visibleSkills(rq.ctx, rq.id)
	if err != nil {
		rq.hookFailed(m, "ListSkills", err)
		return true
	}
	if ss := skillOf(skills, uri); ss != nil {
		for _, f := range ss.files {
			if f.uri != uri {
				continue
			}
			rc := ResourceContents{URI: uri, MimeType: f.mime}
			if utf8.Valid(f.content) && !strings.HasPrefix(f.mime, "application/octet-stream") {
				rc.Text = string(f.content)
			} else {
				rc.Blob = f.content
			}
			rq.replyContents(m, []ResourceContents{rc})
			return true
		}
	}
	rq.fail(m.ID, rq.resourceNotFound(uri))
	return true
}

// skillResources are the SKILL.md resources of resources/list.
func (c *catalog) skillResources(ctx context.Context, id Identity) ([]Resource, error) {
	if !c.hasSkills() {
		return nil, nil
	}
	skills, err := c.visibleSkills(ctx, id)
	if err != nil {
		return nil, err
	}
	var desc struct{ Description string }
	out := make([]Resource, len(skills))
	for i, ss := range skills {
		json.Unmarshal(ss.front, &desc)
		out[i] = Resource{URI: ss.uri, Name: ss.name, Description: desc.Description,
			MimeType: "text/markdown", Size: int64(len(ss.files[0].content))}
	}
	return out, nil
}

const directoryMime = "inode/directory"

type dirChild struct {
	URI      string `json:"uri"`
	Name     string `json:"name"`
	MimeType string `json:"mimeType"`
	Size     int    `json:"size,omitempty"`
}

// errNotDirectory is the one answer of resources/directory/read for a URI
// that is not a directory the caller may see.
func errNotDirectory(uri string) *jsonrpc.Error {
	data, _ := json.Marshal(map[string]string{"uri": uri})
	return rpcErrorData(CodeInvalidParams, "Invalid params: not a directory", data)
}

func (c *catalog) readDirectory(rq *request, m *jsonrpc.Message) {
	p, ok := rq.uriParams(m)
	if !ok {
		return
	}
	skills, err := c.visibleSkills(rq.ctx, rq.id)
	if err != nil {
		rq.hookFailed(m, "ListSkills", err)
		return
	}
	ss := skillOf(skills, p.URI)
	var kids []dirChild
	if ss != nil {
		kids = ss.children(strings.TrimSuffix(p.URI, "/"))
	}
	if kids == nil {
		rq.fail(m.ID, errNotDirectory(p.URI))
		return
	}
	listPage(c, rq, m, "resources", kids)
}

// children lists the direct children of dir (a URI without a trailing
// slash), sorted by URI; nil when dir is not a directory of ss.
func (ss *servedSkill) children(dir string) []dirChild {
	root := skillScheme + ss.name
	if dir != root && !strings.HasPrefix(dir, root+"/") {
		return nil
	}
	prefix := dir + "/"
	subdirs := map[string]bool{}
	var kids []dirChild
	for _, f := range ss.files {
		rest, ok := strings.CutPrefix(f.uri, prefix)
		if !ok {
			continue
		}
		if sub, _, deeper := strings.Cut(rest, "/"); deeper {
			if !subdirs[sub] {
				subdirs[sub] = true
				kids = append(kids, dirChild{URI: prefix + sub, Name: sub, MimeType: directoryMime})
			}
			continue
		}
		kids = append(kids, dirChild{URI: f.uri, Name: rest, MimeType: f.mime, Size: len(f.content)})
	}
	if kids == nil {
		return nil // a file, or nothing
	}
	sort.Slice(kids, func(i, j int) bool { return kids[i].URI < kids[j].URI })
	return kids
}

package mcphandler

import (
	"os"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestStoreSchema holds SPEC.md's storage table against store_keys.go: every
// row names a key, channel or lifetime the code uses, and every key and
// channel of store_keys.go has its row.
func TestStoreSchema(t *testing.T) {
	b, err := os.ReadFile("SPEC.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(b), "| record | key | signed | lifetime |")
	if !ok {
		t.Fatal("SPEC.md has no storage table")
	}
	table, _, _ = strings.Cut(table, "\n\n")
	row := regexp.MustCompile(`(?m)^\| (.+?) \| (.+?) \| (.+?) \| (.+?) \|$`)
	rows := map[string]string{} // key column → lifetime column
	for _, m := range row.FindAllStringSubmatch(table, -1) {
		rows[m[2]] = m[4]
	}
	h := New(Config{Sessions: SessionOptions{KeepAlive: 10 * time.Second}})
	for _, c := range []struct {
		key, made string
		lifetime  string        // a phrase of the row's lifetime column
		ttl, want time.Duration // the code's lifetime and what the row says
	}{
		{"`confirm/<id>`", confirmKey("<id>"), "`ConfirmTimeout` + 1 min", h.confirms.confirmTTL(), h.cfg.ConfirmTimeout + time.Minute},
		{"`confirm-of/<session>/<stream>`", confirmOfKey("<session>", "<stream>"), "`ConfirmTimeout` + 1 min + `Config.Sessions.ResumeWindow`", h.confirms.confirmOfTTL(), h.cfg.ConfirmTimeout + time.Minute + h.cfg.Sessions.ResumeWindow},
		{"`lease/<id>`", leaseKey("<id>"), "5 s, renewed every 5 s / 3", leaseTTL, 5 * time.Second},
		{"`getstream/<session>`", getStreamKey("<session>"), "2 × `Config.Sessions.KeepAlive`", h.sessions.getStreamTTL(), 2 * h.cfg.Sessions.KeepAlive},
		{"`nonce/<n>`", nonceKey("<n>"), "`ConfirmTimeout` + 1 min", h.confirms.confirmTTL(), h.cfg.ConfirmTimeout + time.Minute},
		{"`events/<session>/<stream>`", eventKey("<session>", "<stream>"), "`Config.Sessions.ResumeWindow` (5 min)", h.cfg.Sessions.ResumeWindow, 5 * time.Minute},
		{"`event-logs/<session>`", eventLogsKey("<session>"), "`Config.Sessions.ResumeWindow` after its first event", h.cfg.Sessions.ResumeWindow, h.cfg.Sessions.ResumeWindow},
		{"`confirm-owner/<digest>`", digestOf(confirmOwnerKey(Identity{})), "2 × `ConfirmTimeout` + 1 min", h.confirms.confirmCount(), 2*h.cfg.ConfirmTimeout + time.Minute},
	} {
		life, ok := rows[c.key]
		switch {
		case !ok:
			t.Errorf("SPEC.md's storage table has no row for key %s", c.key)
		case "`"+c.made+"`" != c.key:
			t.Errorf("SPEC.md says key %s, store_keys.go makes %q", c.key, c.made)
		case !strings.Contains(life, c.lifetime):
			t.Errorf("key %s: SPEC.md says lifetime %q, want it to say %q", c.key, life, c.lifetime)
		case c.ttl != c.want:
			t.Errorf("key %s: lifetime %v, SPEC.md's %q is %v", c.key, c.ttl, c.lifetime, c.want)
		}
	}
	var channels string
	for key := range rows {
		if strings.HasPrefix(key, "pub/sub") {
			channels = key
		}
	}
	_, chanRow, _ := strings.Cut(table, "| channels: ")
	chanRow, _, _ = strings.Cut(chanRow, "|")
	for _, ch := range []string{replyChannel("s", "i"), eventChannel("s", "p"), sessionChannel("s"), cancelChannel, notifyChannel} {
		name, _, _ := strings.Cut(ch, "/")
		want := "`" + name + "`"
		if strings.Contains(ch, "/") {
			want = "`" + name + "/…`"
		}
		if !strings.Contains(chanRow, want) {
			t.Errorf("SPEC.md's channels row %q does not name channel %s", chanRow, want)
		}
	}
	if channels == "" {
		t.Error("SPEC.md's storage table has no pub/sub row")
	}
}

// digestOf is key with what follows its last slash (a digest) written
// <digest>.
func digestOf(key string) string {
	return key[:strings.LastIndexByte(key, '/')+1] + "<digest>"
}

package main

import (
	"context"

	"github.com/mcphandler/mcphandler"
)

// conformanceSkills are the fixtures of the sep-2640-skills-* scenarios
// (the extension io.modelcontextprotocol/skills): one skill with a file
// in a subdirectory, so that resources/directory/read has a directory
// to descend into.
func conformanceSkills(context.Context) ([]mcphandler.Skill, error) {
	return []mcphandler.Skill{{
		Name:        "pdf-processing",
		Description: "Extract, fill, and assemble PDF documents",
		Body:        "# PDF processing\n\nSee references/FORMS.md for the form fields.\n",
		Files: []mcphandler.SkillFile{
			{Path: "references/FORMS.md", MimeType: "text/markdown", Content: []byte("# Forms\n\nField names and types.\n")},
			{Path: "scripts/fill.py", MimeType: "text/x-python", Content: []byte("print('fill')\n")},
		},
	}}, nil
}

package main

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestMCPSkillsCommand lists the skills of a server that declares the
// extension, as text and JSON, reading none of their files.
func TestMCPSkillsCommand(t *testing.T) {
	t.Parallel()
	srv := skillsMCP(t, honestSkill)
	code, out, errOut := runHarnessd(t, nil, "mcp", "skills", "docs", "--url", srv.URL)
	if code != 0 || !strings.Contains(out, "docs  ready  1 skills") ||
		!strings.Contains(out, "pdf-processing  Extract, fill, and assemble PDF documents  "+testSkillURI+" (2 files)") {
		t.Fatalf("mcp skills: exit %d, stdout %q, stderr %q", code, out, errOut)
	}
	code, out, errOut = runHarnessd(t, nil, "mcp", "skills", "--json", "--url", srv.URL)
	var got struct {
		Servers []skillsView `json:"servers"`
	}
	if err := json.Unmarshal([]byte(out), &got); code != 0 || err != nil || len(got.Servers) != 1 || len(got.Servers[0].Skills) != 1 {
		t.Fatalf("mcp skills --json: exit %d, %v, stdout %q, stderr %q", code, err, out, errOut)
	}
	if s := got.Servers[0].Skills[0]; s.Name != "pdf-processing" || s.URI != testSkillURI || s.Files != 2 {
		t.Errorf("skill = %+v", s)
	}
	if n := len(srv.received("resources/read")); n != 0 {
		t.Errorf("mcp skills read %d skill files; it must read none", n)
	}
	code, _, errOut = runHarnessd(t, nil, "mcp", "skills", "nosuch", "--url", srv.URL, "--name", "docs")
	if code != 2 || !strings.Contains(errOut, `no server named "nosuch"`) {
		t.Errorf("unknown server: exit %d, stderr %q", code, errOut)
	}
}

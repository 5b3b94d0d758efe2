package main

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// TestRunLoadSkill runs the scripted model against a server offering one
// skill: the system prompt lists it and load_skill is offered; the model
// loads it, reads the file the skill points to, and answers with what the
// skill said. Nothing is read before load_skill. A tampered SKILL.md
// reaches the model only as an error.
func TestRunLoadSkill(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		serve    func(uri string) string
		wantOut  string
		wantRead []string
	}{
		{"verified", honestSkill, "PELICAN: Forms are filled field by field.", []string{testSkillURI, testSkillForms}},
		{"tampered", func(uri string) string { return strings.Replace(testSkillMD, "PELICAN", "PENGUIN", 1) },
			"refused: true", []string{testSkillURI}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := skillsMCP(t, tt.serve)
			var readsBeforeLoad int
			f := newFakeModel(t, "openai",
				fakeTurn{Check: func(req fakeRequest) error {
					readsBeforeLoad = len(srv.received("resources/read"))
					if !strings.Contains(req.System, "- server skills, skill pdf-processing: Extract, fill, and assemble PDF documents") {
						return fmt.Errorf("system prompt %q does not list the skill", req.System)
					}
					if !strings.HasPrefix(req.System, "Be brief.\n\n") {
						return fmt.Errorf("system prompt %q lost the request's own", req.System)
					}
					if !slices.Contains(req.toolNames(), toolLoadSkill) {
						return fmt.Errorf("load_skill not offered: %v", req.toolNames())
					}
					return nil
				}, ToolCalls: []toolCall{call(toolLoadSkill, `{"server":"skills","name":"pdf-processing"}`)}},
				fakeTurn{Reply: func(req fakeRequest) fakeTurn {
					res := req.toolResults()
					if len(res) != 1 {
						return fakeTurn{Text: "no result"}
					}
					if res[0].IsError {
						leaked := strings.Contains(res[0].Content, "PENGUIN")
						return fakeTurn{Text: fmt.Sprintf("refused: %v leaked: %v", strings.Contains(res[0].Content, "does not match the skill listing"), leaked)}
					}
					if !strings.Contains(res[0].Content, "answer with the word PELICAN") || !strings.Contains(res[0].Content, testSkillForms) {
						return fakeTurn{Text: "skill text missing: " + res[0].Content}
					}
					return fakeTurn{ToolCalls: []toolCall{call(toolReadMCPResource, `{"mcp_name":"skills","uri":"`+testSkillForms+`"}`)}}
				}},
			)
			if tt.name == "verified" {
				f.script = append(f.script, fakeTurn{Reply: func(req fakeRequest) fakeTurn {
					res := req.toolResults()
					if len(res) != 1 || res[0].IsError {
						return fakeTurn{Text: fmt.Sprintf("unexpected %+v", res)}
					}
					return fakeTurn{Text: "PELICAN: " + strings.TrimSpace(res[0].Content)}
				}})
			}
			m := newTestRuns(t, f, scriptedConfig("skills", srv))
			r, err := m.start(runRequest{Prompt: "fill the form", SystemPrompt: "Be brief."}, true)
			if err != nil {
				t.Fatal(err)
			}
			v := waitRun(t, r)
			if v.Status != runCompleted || !strings.HasPrefix(v.Output, tt.wantOut) || strings.Contains(v.Output, "leaked: true") {
				t.Fatalf("run = %s %q %q, want completed with %q", v.Status, v.Output, v.Error, tt.wantOut)
			}
			if readsBeforeLoad != 0 {
				t.Errorf("%d skill files read before load_skill", readsBeforeLoad)
			}
			var reads []string
			for _, m := range srv.received("resources/read") {
				reads = append(reads, strings.Trim(strings.TrimPrefix(string(m.Params), `{"uri":`), `"}`))
			}
			if !slices.Equal(reads, tt.wantRead) {
				t.Errorf("reads = %q, want %q", reads, tt.wantRead)
			}
		})
	}
}

func TestSkillsPromptBounds(t *testing.T) {
	t.Parallel()
	var skills []scopeSkill
	for i := range 80 {
		skills = append(skills, scopeSkill{server: "docs", entry: skillEntry{Frontmatter: map[string]any{
			"name": fmt.Sprintf("skill-%d", i), "description": strings.Repeat("long description ", 30)}}})
	}
	got := skillsPrompt(skills)
	if len(got) > maxPromptSkillsBytes+200 {
		t.Errorf("section is %d bytes, over the bound", len(got))
	}
	if !strings.Contains(got, "more; load_skill with an unknown name lists") {
		t.Errorf("section does not say skills were left out:\n%s", got)
	}
	if skillsPrompt(nil) != "" {
		t.Error("a run without skills gets a skills section")
	}
}

// TestSkillsPromptEscapesControls lists a skill whose name and
// description carry terminal escapes: the model sees them escaped, as an
// operator does, and the escaped name is the one load_skill matches.
func TestSkillsPromptEscapesControls(t *testing.T) {
	t.Parallel()
	entry := skillEntry{Frontmatter: map[string]any{"name": "esc" + hostileText, "description": "skill " + hostileText}}
	got := skillsPrompt([]scopeSkill{{server: "evil", entry: entry}})
	checkNoRawControls(t, "the skills section", got)
	if !strings.Contains(got, "skill "+hostileEscaped) || entry.name() != "esc"+hostileEscaped {
		t.Errorf("skills section:\n%s\nname %q; want the name and description escaped", got, entry.name())
	}
}

package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"reflect"
	"strings"
	"testing"
)

const (
	testSkillURI     = "skill://pdf-processing/SKILL.md"
	testSkillForms   = "skill://pdf-processing/references/FORMS.md"
	testSkillMD      = "---\nname: pdf-processing\ndescription: Extract, fill, and assemble PDF documents\nmetadata:\n  version: \"2.1\"\n  tags:\n  - pdf\n  - forms\n---\n\nTo fill a form, read references/FORMS.md, then answer with the word PELICAN.\n"
	testSkillFormsMD = "Forms are filled field by field.\n"
)

func skillDigestOf(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// skillsMCP returns a scripted Streamable HTTP server that declares the
// skills extension and lists one skill; serve returns the content each
// resources/read gets (tampering with it is the test's business).
func skillsMCP(t *testing.T, serve func(uri string) string) *fakeMCP {
	t.Helper()
	entry := map[string]any{
		"uri": testSkillURI,
		"frontmatter": map[string]any{"name": "pdf-processing", "description": "Extract, fill, and assemble PDF documents",
			"metadata": map[string]any{"version": "2.1", "tags": []string{"pdf", "forms"}}},
		"resources": []map[string]any{
			{"uri": testSkillURI, "digest": skillDigestOf(testSkillMD), "size": len(testSkillMD)},
			{"uri": testSkillForms, "digest": skillDigestOf(testSkillFormsMD), "size": len(testSkillFormsMD)},
		},
	}
	return newScriptedMCP(t, func(w http.ResponseWriter, r *http.Request, m mcpExchange) bool {
		switch m.Method {
		case "initialize":
			w.Header().Set("Mcp-Session-Id", "skills-session")
			writeRPCResult(w, m.ID, map[string]any{
				"protocolVersion": latestProtocolVersion,
				"capabilities":    map[string]any{"tools": map[string]any{}, "resources": map[string]any{}, "extensions": map[string]any{skillsExtension: map[string]any{}}},
				"serverInfo":      map[string]any{"name": "skills", "version": "1"},
			})
		case "skills/list":
			writeRPCResult(w, m.ID, map[string]any{"skills": []any{entry}})
		case "resources/read":
			var p struct {
				URI string `json:"uri"`
			}
			json.Unmarshal(m.Params, &p)
			writeRPCResult(w, m.ID, map[string]any{"contents": []any{map[string]any{"uri": p.URI, "mimeType": "text/markdown", "text": serve(p.URI)}}})
		default:
			return false
		}
		return true
	})
}

// honestSkill serves the listed content.
func honestSkill(uri string) string {
	if uri == testSkillForms {
		return testSkillFormsMD
	}
	return testSkillMD
}

func TestParseFrontmatter(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		text    string
		want    map[string]any
		wantErr string
	}{
		{"scalars", "---\nname: a\ndescription: \"quoted: yes\"\nlicense: 'it''s'\ncount: 3\nflag: true\nnothing: ~\n---\nbody",
			map[string]any{"name": "a", "description": "quoted: yes", "license": "it's", "count": 3.0, "flag": true, "nothing": nil}, ""},
		{"nested", "---\nname: a\nmetadata:\n  version: \"1.0\"\n  list:\n    - x\n    - y\n---\n",
			map[string]any{"name": "a", "metadata": map[string]any{"version": "1.0", "list": []any{"x", "y"}}}, ""},
		{"block scalar", "---\ndescription: |\n  line one\n  line two\nname: a\n---\n",
			map[string]any{"description": "line one\nline two\n", "name": "a"}, ""},
		{"no frontmatter", "# Title\n", nil, "no frontmatter"},
		{"unclosed", "---\nname: a\n", nil, "not closed"},
		{"flow", "---\ntags: [a, b]\n---\n", nil, "flow collections"},
		{"duplicate", "---\nname: a\nname: b\n---\n", nil, "appears twice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, _, err := parseFrontmatter(tt.text)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("parseFrontmatter() error = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, tt.want) {
				t.Errorf("parseFrontmatter() = %#v, %v; want %#v", got, err, tt.want)
			}
		})
	}
}

// TestSkillVerification loads the listed skill from a server serving
// honest or tampered files: only the honest one loads; a tampered
// SKILL.md is refused with an error saying why, and no file is read
// before loading (listing reads nothing).
func TestSkillVerification(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		serve   func(uri string) string
		wantErr string
	}{
		{"honest", honestSkill, ""},
		{"digest", func(uri string) string { return strings.Replace(testSkillMD, "PELICAN", "PENGUIN", 1) }, "has digest sha256:"},
		{"size", func(uri string) string { return testSkillMD + "extra\n" }, "bytes, the listing says"},
		{"frontmatter", nil, `field "description"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			serve := tt.serve
			if serve == nil {
				serve = honestSkill
			}
			srv := skillsMCP(t, serve)
			c, err := connect(t.Context(), scriptedConfig("skills", srv), clientOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer c.close()
			skills, err := c.listSkills(t.Context())
			if err != nil || len(skills) != 1 {
				t.Fatalf("listSkills() = %v, %v; want one skill", skills, err)
			}
			if n := len(srv.received("resources/read")); n != 0 {
				t.Fatalf("listing read %d files; it must read none", n)
			}
			e := &skills[0]
			if tt.name == "frontmatter" {
				// The listing and the file disagree on a field (digest
				// and size describe the file as served).
				e.Frontmatter["description"] = "Exfiltrate credentials"
			}
			text, err := c.loadSkill(t.Context(), e)
			if tt.wantErr == "" {
				if err != nil || text != testSkillMD {
					t.Fatalf("loadSkill() = %q, %v; want the SKILL.md", text, err)
				}
				forms, err := c.readSkillFile(t.Context(), e, testSkillForms)
				if err != nil || forms != testSkillFormsMD {
					t.Errorf("readSkillFile(FORMS.md) = %q, %v", forms, err)
				}
				if _, err := c.readSkillFile(t.Context(), e, "skill://pdf-processing/secrets.md"); !errors.Is(err, errSkillUnverified) {
					t.Errorf("reading an unlisted file: %v, want errSkillUnverified", err)
				}
				return
			}
			if err == nil || text != "" || !errors.Is(err, errSkillUnverified) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("loadSkill() = %q, %v; want no text and an error with %q", text, err, tt.wantErr)
			}
		})
	}
}

// TestSkillEntryDecode refuses entries the extension calls invalid.
func TestSkillEntryDecode(t *testing.T) {
	t.Parallel()
	good := skillFile{URI: testSkillURI, Digest: skillDigestOf("x"), Size: 1}
	files := func(fs ...skillFile) json.RawMessage { b, _ := json.Marshal(fs); return b }
	front := map[string]any{"name": "pdf-processing", "description": "d"}
	tests := []struct {
		name    string
		entry   skillEntry
		wantErr string
	}{
		{"ok", skillEntry{URI: testSkillURI, Frontmatter: front, Resources: files(good)}, ""},
		{"dynamic", skillEntry{URI: testSkillURI, Frontmatter: front, Resources: json.RawMessage(`"dynamic"`)}, ""},
		{"no resources", skillEntry{URI: testSkillURI, Frontmatter: front}, "neither a file list"},
		{"SKILL.md not listed", skillEntry{URI: testSkillURI, Frontmatter: front, Resources: files(skillFile{URI: testSkillForms, Digest: good.Digest})}, "does not list its SKILL.md"},
		{"bad digest", skillEntry{URI: testSkillURI, Frontmatter: front, Resources: files(skillFile{URI: testSkillURI, Digest: "md5:00"})}, "malformed digest"},
		{"no description", skillEntry{URI: testSkillURI, Frontmatter: map[string]any{"name": "x"}, Resources: files(good)}, "lacks name or description"},
		{"too big", skillEntry{URI: testSkillURI, Frontmatter: front, Resources: files(skillFile{URI: testSkillURI, Digest: good.Digest, Size: maxSkillBytes + 1})}, "over the extension's limits"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.entry.decode()
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Errorf("decode() = %v, want %q", err, tt.wantErr)
			}
		})
	}
}

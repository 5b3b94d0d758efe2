package main

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strconv"
	"strings"
)

// This file holds the client side of the skills extension (SEP-2640,
// io.modelcontextprotocol/skills): skills/list, and the reading of a
// skill's files through resources/read, each verified against the
// listing's digest and size, SKILL.md's frontmatter against the listed
// one. Nothing of a skill is read before it is loaded.

// skillsExtension is the extension's identifier in the server's
// capabilities.
const skillsExtension = "io.modelcontextprotocol/skills"

// The extension's per-skill limits, checkable from the entry alone.
const (
	maxSkillFiles = 512
	maxSkillBytes = 16 << 20
)

// A skillFile is one file of a skill as its entry lists it.
type skillFile struct {
	URI    string `json:"uri"`
	Digest string `json:"digest"` // "sha256:" and 64 lowercase hex digits
	Size   int64  `json:"size"`
}

// A skillEntry is one skill as skills/list returns it: the URI of its
// SKILL.md, its frontmatter verbatim, and its complete file manifest
// (Files; nil with Dynamic for a skill whose content is generated).
type skillEntry struct {
	URI         string          `json:"uri"`
	Frontmatter map[string]any  `json:"frontmatter"`
	Resources   json.RawMessage `json:"resources"`
	Files       []skillFile     `json:"-"`
	Dynamic     bool            `json:"-"`
}

// name returns the skill's frontmatter name, its controls escaped
// (escapeControls): what the model and an operator see, and what
// load_skill matches.
func (e *skillEntry) name() string {
	s, _ := e.Frontmatter["name"].(string)
	return escapeControls(s)
}

// description returns the skill's frontmatter description, its controls
// escaped.
func (e *skillEntry) description() string {
	s, _ := e.Frontmatter["description"].(string)
	return escapeControls(s)
}

var skillDigest = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// decode checks the entry as the extension requires (name, description,
// resources an array listing SKILL.md or "dynamic", well-formed digests,
// the limits) and fills Files or Dynamic.
func (e *skillEntry) decode() error {
	if e.URI == "" || !strings.HasSuffix(e.URI, "/SKILL.md") {
		return fmt.Errorf("skill %q: uri is not the URI of a SKILL.md", e.URI)
	}
	if e.name() == "" || e.description() == "" {
		return fmt.Errorf("skill %s: frontmatter lacks name or description", e.URI)
	}
	if string(e.Resources) == `"dynamic"` {
		e.Dynamic = true
		return nil
	}
	if err := json.Unmarshal(e.Resources, &e.Files); err != nil || e.Files == nil {
		return fmt.Errorf("skill %s: resources is neither a file list nor \"dynamic\"", e.URI)
	}
	var total int64
	listsSkillMD := false
	for _, f := range e.Files {
		if !skillDigest.MatchString(f.Digest) || f.Size < 0 {
			return fmt.Errorf("skill %s: file %s has a malformed digest or size", e.URI, f.URI)
		}
		total += f.Size
		listsSkillMD = listsSkillMD || f.URI == e.URI
	}
	switch {
	case !listsSkillMD:
		return fmt.Errorf("skill %s: resources does not list its SKILL.md", e.URI)
	case len(e.Files) > maxSkillFiles || total > maxSkillBytes:
		return fmt.Errorf("skill %s: %d files, %d bytes: over the extension's limits (%d files, %d bytes)", e.URI, len(e.Files), total, maxSkillFiles, maxSkillBytes)
	}
	return nil
}

// file returns the listed file at uri.
func (e *skillEntry) file(uri string) (skillFile, bool) {
	for _, f := range e.Files {
		if f.URI == uri {
			return f, true
		}
	}
	return skillFile{}, false
}

// offersSkills reports whether the server declared the skills extension.
func (c *mcpClient) offersSkills() bool {
	_, ok := c.capabilities().Extensions[skillsExtension]
	return ok
}

// listSkills returns the skills the server lists, all pages; entries the
// extension calls invalid are left out with a warning (they must not be
// loaded). It reads no skill file. Nil for a server without the
// extension.
func (c *mcpClient) listSkills(ctx context.Context) ([]skillEntry, error) {
	if !c.offersSkills() {
		return nil, nil
	}
	listed, err := listAll[skillEntry](ctx, c, "skills/list", "skills")
	if err != nil {
		return nil, fmt.Errorf("skills/list: %w", err)
	}
	skills := listed[:0]
	for _, e := range listed {
		if err := e.decode(); err != nil {
			c.logger.Warn("skill left out", "err", err)
			continue
		}
		skills = append(skills, e)
	}
	return skills, nil
}

// errSkillUnverified marks a skill file whose content is not what the
// listing describes: it must not be used.
var errSkillUnverified = errors.New("does not match the skill listing")

// readSkillFile reads one listed file of skill e through resources/read
// and returns its content once its size and digest match the listing. A
// file not listed is refused before any read (for a dynamic skill, none
// can be checked: the read is returned as is).
func (c *mcpClient) readSkillFile(ctx context.Context, e *skillEntry, uri string) (string, error) {
	f, listed := e.file(uri)
	if !listed && !e.Dynamic {
		return "", fmt.Errorf("skill %q: %s is not one of its files: %w", e.name(), uri, errSkillUnverified)
	}
	res, err := c.readResource(ctx, uri)
	if err != nil {
		return "", fmt.Errorf("skill %q: read %s: %w", e.name(), uri, err)
	}
	if len(res.Contents) != 1 {
		return "", fmt.Errorf("skill %q: read %s: %d contents, want 1: %w", e.name(), uri, len(res.Contents), errSkillUnverified)
	}
	body := res.Contents[0]
	raw := []byte(body.Text)
	if body.Blob != "" {
		if raw, err = base64.StdEncoding.DecodeString(body.Blob); err != nil {
			return "", fmt.Errorf("skill %q: read %s: blob: %v", e.name(), uri, err)
		}
	}
	if e.Dynamic {
		return string(raw), nil
	}
	if int64(len(raw)) != f.Size {
		return "", fmt.Errorf("skill %q: %s is %d bytes, the listing says %d: %w", e.name(), uri, len(raw), f.Size, errSkillUnverified)
	}
	sum := sha256.Sum256(raw)
	if got := "sha256:" + hex.EncodeToString(sum[:]); got != f.Digest {
		return "", fmt.Errorf("skill %q: %s has digest %s, the listing says %s: %w", e.name(), uri, got, f.Digest, errSkillUnverified)
	}
	return string(raw), nil
}

// loadSkill reads and verifies the skill's SKILL.md (size, digest, and
// its frontmatter field by field against the listing's) and returns it.
// On any mismatch nothing of it is returned.
func (c *mcpClient) loadSkill(ctx context.Context, e *skillEntry) (string, error) {
	text, err := c.readSkillFile(ctx, e, e.URI)
	if err != nil {
		return "", err
	}
	front, _, err := parseFrontmatter(text)
	if err != nil {
		return "", fmt.Errorf("skill %q: SKILL.md: %v: %w", e.name(), err, errSkillUnverified)
	}
	if err := compareFrontmatter(e.Frontmatter, front); err != nil {
		return "", fmt.Errorf("skill %q: SKILL.md frontmatter %v: %w", e.name(), err, errSkillUnverified)
	}
	return text, nil
}

// compareFrontmatter compares the parsed frontmatter with the listed one
// field by field, as JSON values.
func compareFrontmatter(listed, parsed map[string]any) error {
	norm := func(v any) any {
		b, _ := json.Marshal(v)
		var out any
		json.Unmarshal(b, &out)
		return out
	}
	for k, lv := range listed {
		pv, ok := parsed[k]
		if !ok {
			return fmt.Errorf("lacks %q, which the listing has", k)
		}
		if !reflect.DeepEqual(norm(lv), norm(pv)) {
			return fmt.Errorf("field %q is %s, the listing says %s", k, oneLine(string(encodeCompact(pv)), 80), oneLine(string(encodeCompact(lv)), 80))
		}
	}
	for k := range parsed {
		if _, ok := listed[k]; !ok {
			return fmt.Errorf("has %q, which the listing lacks", k)
		}
	}
	return nil
}

// parseFrontmatter splits a SKILL.md into its YAML frontmatter (between
// "---" lines at the top) and its body. It reads the YAML the Agent Skills
// format uses: mappings, nested by indentation, of scalars (plain, single
// or double quoted, | and > blocks) and block lists; anything else is an
// error, never a guess.
func parseFrontmatter(text string) (map[string]any, string, error) {
	lines := strings.Split(strings.ReplaceAll(text, "\r\n", "\n"), "\n")
	if len(lines) == 0 || strings.TrimSpace(lines[0]) != "---" {
		return nil, "", errors.New("no frontmatter (the file must begin with ---)")
	}
	end := -1
	for i := 1; i < len(lines); i++ {
		if strings.TrimRight(lines[i], " \t") == "---" {
			end = i
			break
		}
	}
	if end < 0 {
		return nil, "", errors.New("frontmatter not closed by ---")
	}
	p := &yamlLines{lines: lines[1:end]}
	v, err := p.block(0)
	if err != nil {
		return nil, "", err
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, "", errors.New("frontmatter is not a mapping")
	}
	return m, strings.Join(lines[end+1:], "\n"), nil
}

// yamlLines is the small YAML reader of parseFrontmatter.
type yamlLines struct {
	lines []string
	i     int
}

// next skips blank and comment lines and returns the next line's indent
// and text; ok false at the end.
func (p *yamlLines) next() (indent int, text string, ok bool) {
	for p.i < len(p.lines) {
		l := p.lines[p.i]
		t := strings.TrimLeft(l, " ")
		if t == "" || strings.HasPrefix(t, "#") {
			p.i++
			continue
		}
		if strings.HasPrefix(t, "\t") {
			return 0, "", false
		}
		return len(l) - len(t), strings.TrimRight(t, " "), true
	}
	return 0, "", false
}

// block reads a mapping or a list whose lines are indented exactly indent.
func (p *yamlLines) block(indent int) (any, error) {
	in, text, ok := p.next()
	if !ok || in != indent {
		return map[string]any{}, nil
	}
	if strings.HasPrefix(text, "- ") || text == "-" {
		var list []any
		for ok && in == indent && (strings.HasPrefix(text, "- ") || text == "-") {
			p.i++
			v, err := yamlScalar(strings.TrimSpace(strings.TrimPrefix(text, "-")))
			if err != nil {
				return nil, err
			}
			list = append(list, v)
			in, text, ok = p.next()
		}
		return list, nil
	}
	m := map[string]any{}
	for ok && in == indent {
		key, rest, found := strings.Cut(text, ":")
		if !found || key == "" || strings.ContainsAny(key, "{}[]") {
			return nil, fmt.Errorf("frontmatter line %q is not key: value", text)
		}
		key = strings.Trim(key, `"'`)
		rest = strings.TrimSpace(rest)
		p.i++
		var v any
		var err error
		switch {
		case rest == "":
			if nin, _, nok := p.next(); nok && nin > indent {
				v, err = p.block(nin)
			} else if nok && nin == indent && strings.HasPrefix(p.peek(), "- ") {
				v, err = p.block(nin)
			}
		case rest == "|" || rest == ">" || rest == "|-" || rest == ">-":
			v = p.blockScalar(indent, rest)
		default:
			v, err = yamlScalar(rest)
		}
		if err != nil {
			return nil, err
		}
		if _, dup := m[key]; dup {
			return nil, fmt.Errorf("frontmatter key %q appears twice", key)
		}
		m[key] = v
		in, text, ok = p.next()
	}
	if ok && in > indent {
		return nil, fmt.Errorf("frontmatter line %q is indented unexpectedly", text)
	}
	return m, nil
}

// peek returns the current line's text without its indent.
func (p *yamlLines) peek() string {
	if p.i >= len(p.lines) {
		return ""
	}
	return strings.TrimLeft(p.lines[p.i], " ")
}

// blockScalar reads the lines of a | or > scalar more indented than
// indent.
func (p *yamlLines) blockScalar(indent int, style string) string {
	var parts []string
	for p.i < len(p.lines) {
		l := p.lines[p.i]
		t := strings.TrimLeft(l, " ")
		if t != "" && len(l)-len(t) <= indent {
			break
		}
		parts = append(parts, t)
		p.i++
	}
	for len(parts) > 0 && parts[len(parts)-1] == "" {
		parts = parts[:len(parts)-1]
	}
	sep := "\n"
	if style[0] == '>' {
		sep = " "
	}
	s := strings.Join(parts, sep)
	if !strings.HasSuffix(style, "-") {
		s += "\n"
	}
	return s
}

// yamlScalar reads one inline scalar: quoted strings, null, booleans,
// numbers, else a plain string (a trailing " #" comment removed). Flow
// collections ({...}, [...]) are refused.
func yamlScalar(s string) (any, error) {
	switch {
	case s == "":
		return nil, nil
	case strings.HasPrefix(s, `"`):
		var v string
		if err := json.Unmarshal([]byte(s), &v); err != nil {
			return nil, fmt.Errorf("frontmatter value %s: not a valid double-quoted string", s)
		}
		return v, nil
	case strings.HasPrefix(s, "'"):
		if len(s) < 2 || !strings.HasSuffix(s, "'") {
			return nil, fmt.Errorf("frontmatter value %s: unterminated quote", s)
		}
		return strings.ReplaceAll(s[1:len(s)-1], "''", "'"), nil
	case strings.HasPrefix(s, "{") || strings.HasPrefix(s, "["):
		return nil, fmt.Errorf("frontmatter value %s: flow collections are not supported", s)
	}
	if i := strings.Index(s, " #"); i >= 0 {
		s = strings.TrimSpace(s[:i])
	}
	switch s {
	case "null", "~", "Null", "NULL":
		return nil, nil
	case "true", "True", "TRUE":
		return true, nil
	case "false", "False", "FALSE":
		return false, nil
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return float64(n), nil
	}
	if f, err := strconv.ParseFloat(s, 64); err == nil && !strings.ContainsAny(s, "xXnN") {
		return f, nil
	}
	return s, nil
}

package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// This file holds what the model sees of the skills extension: the
// skills of the run's servers listed in the system prompt (bounded), the
// built-in load_skill that returns a skill's verified SKILL.md, and the
// verification of a skill's other files read through read_mcp_resource.

const toolLoadSkill = "load_skill"

// Bounds of the skills section of the system prompt.
const (
	maxPromptSkills           = 50
	maxPromptSkillsBytes      = 4 << 10
	maxPromptSkillDescription = 200
)

// loadSkillBuiltin is the load_skill entry of builtinTools. It is
// deferred like the others and activated at the start of a run whose
// servers list skills.
var loadSkillBuiltin = builtinTool{
	name: toolLoadSkill,
	description: "Load a skill (instructions for a way of working) that an MCP server offers: returns its SKILL.md, " +
		"verified against the server's listing. Its other files are read with read_mcp_resource when the skill says to.",
	inputSchema: `{"type":"object","properties":{` +
		`"server":{"type":"string","description":"The MCP server's name, as the skills list in the system prompt gives it"},` +
		`"name":{"type":"string","description":"The skill's name (or its SKILL.md URI when two skills share a name)"}},` +
		`"required":["server","name"]}`,
	call: loadSkillTool,
}

// A scopeSkill is one skill a run reaches: its server and its entry.
type scopeSkill struct {
	server string
	entry  skillEntry
}

// scopeSkills returns the skills of the run's servers, in server order.
func scopeSkills(scope *runScope) []scopeSkill {
	var out []scopeSkill
	for _, name := range scope.serverNames() {
		ms := scope.server(name)
		if ms == nil {
			continue
		}
		for _, e := range ms.skillList() {
			out = append(out, scopeSkill{server: name, entry: e})
		}
	}
	return out
}

// skillsPrompt returns the system prompt section listing skills (server,
// name, description, each description cut to one line), at most
// maxPromptSkills of them within maxPromptSkillsBytes; "" for none.
func skillsPrompt(skills []scopeSkill) string {
	if len(skills) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("Skills available (call load_skill with the server and name before following one; a skill's text comes from its server, not from the user):\n")
	shown := 0
	for _, s := range skills {
		line := fmt.Sprintf("- server %s, skill %s: %s\n", s.server, oneLine(s.entry.name(), 64), oneLine(s.entry.description(), maxPromptSkillDescription))
		if shown == maxPromptSkills || b.Len()+len(line) > maxPromptSkillsBytes {
			break
		}
		b.WriteString(line)
		shown++
	}
	if more := len(skills) - shown; more > 0 {
		fmt.Fprintf(&b, "(and %d more; load_skill with an unknown name lists a server's skills)\n", more)
	}
	return b.String()
}

// prepareSkills is called once the run's servers are open: it builds the
// skills section of the system prompt and, when there are skills,
// activates load_skill and read_mcp_resource (a skill's other files).
func (r *run) prepareSkills() {
	skills := scopeSkills(r.scope)
	section := skillsPrompt(skills)
	r.mu.Lock()
	r.skillsSection = section
	r.mu.Unlock()
	if len(skills) > 0 {
		r.catalog.activate(toolLoadSkill, toolReadMCPResource)
	}
}

// systemPrompt returns the request's system prompt followed by the skills
// section.
func (r *run) systemPrompt() string {
	r.mu.Lock()
	section := r.skillsSection
	r.mu.Unlock()
	switch {
	case section == "":
		return r.req.SystemPrompt
	case r.req.SystemPrompt == "":
		return section
	}
	return r.req.SystemPrompt + "\n\n" + section
}

// findSkill returns the skill of ms named name (or with that SKILL.md
// URI), or an error listing what there is.
func findSkill(server string, ms *managedServer, name string) (*skillEntry, error) {
	skills := ms.skillList()
	var found []*skillEntry
	var names []string
	for i := range skills {
		e := &skills[i]
		names = append(names, e.name())
		if e.name() == name || e.URI == name {
			found = append(found, e)
		}
	}
	switch {
	case len(skills) == 0:
		return nil, fmt.Errorf("server %q offers no skills", server)
	case len(found) == 0:
		return nil, fmt.Errorf("server %q has no skill %q; its skills: %s", server, name, strings.Join(names, ", "))
	case len(found) > 1:
		uris := make([]string, len(found))
		for i, e := range found {
			uris[i] = e.URI
		}
		return nil, fmt.Errorf("server %q has %d skills named %q; give one's URI as name: %s", server, len(found), name, strings.Join(uris, ", "))
	}
	return found[0], nil
}

// loadSkillTool implements load_skill: the skill's SKILL.md, read now
// (never before) and verified; on a mismatch the model gets the error and
// nothing of the file.
func loadSkillTool(ctx context.Context, r *run, args json.RawMessage) (string, error) {
	var a struct {
		Server string `json:"server"`
		Name   string `json:"name"`
	}
	if err := json.Unmarshal(args, &a); err != nil || a.Server == "" || a.Name == "" {
		return "", errors.New(`load_skill: send {"server": "server name", "name": "skill name"}`)
	}
	ms := r.scope.server(a.Server)
	if ms == nil {
		return "", fmt.Errorf("load_skill: no server %q in this run; servers: %s", a.Server, strings.Join(r.scope.serverNames(), ", "))
	}
	e, err := findSkill(a.Server, ms, a.Name)
	if err != nil {
		return "", fmt.Errorf("load_skill: %v", err)
	}
	c, err := ms.current()
	if err != nil {
		return "", fmt.Errorf("load_skill: %v", err)
	}
	text, err := c.loadSkill(ctx, e)
	if err != nil {
		r.logger.Warn("skill refused", "server", a.Server, "skill", e.name(), "err", err)
		return "", fmt.Errorf("load_skill: %v; the skill was not loaded", err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "Skill %q of server %q (%s), verified against the server's listing.\n", e.name(), a.Server, e.URI)
	var others []string
	for _, f := range e.Files {
		if f.URI != e.URI {
			others = append(others, fmt.Sprintf("- %s (%d bytes)", f.URI, f.Size))
		}
	}
	if len(others) > 0 {
		fmt.Fprintf(&b, "Its other files, read with read_mcp_resource (mcp_name %q) only when needed:\n%s\n", a.Server, strings.Join(others, "\n"))
	}
	b.WriteString("\n")
	b.WriteString(text)
	return b.String(), nil
}

// skillOf returns the listed skill of ms that has the file uri.
func skillOf(ms *managedServer, uri string) (*skillEntry, bool) {
	skills := ms.skillList()
	for i := range skills {
		if _, ok := skills[i].file(uri); ok {
			return &skills[i], true
		}
	}
	return nil, false
}

// readSkillResource reads uri for read_mcp_resource when it is a listed
// skill file of ms: verified against the listing (handled true); handled
// false for any other resource.
func readSkillResource(ctx context.Context, ms *managedServer, c *mcpClient, uri string) (text string, handled bool, err error) {
	e, ok := skillOf(ms, uri)
	if !ok {
		return "", false, nil
	}
	text, err = c.readSkillFile(ctx, e, uri)
	return text, true, err
}

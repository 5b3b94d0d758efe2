package main

import (
	"context"
)

// This file holds the skills of a managed server: listed (never read)
// with its tools, shown in its status, and found by name for load_skill.

// A statusSkill is one skill in a serverStatus.
type statusSkill struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	URI         string `json:"uri"`
	Files       int    `json:"files"` // -1 for a dynamic skill
}

// statusSkills returns the status view of skills (nil for none).
func statusSkills(skills []skillEntry) []statusSkill {
	var out []statusSkill
	for i := range skills {
		e := &skills[i]
		files := len(e.Files)
		if e.Dynamic {
			files = -1
		}
		out = append(out, statusSkill{Name: e.name(), Description: e.description(), URI: e.URI, Files: files})
	}
	return out
}

// listSkills returns the skills c lists; a failing skills/list is a
// warning, not a failed server (its tools still work).
func (s *managedServer) listSkills(ctx context.Context, c *mcpClient) []skillEntry {
	skills, err := c.listSkills(ctx)
	if err != nil {
		s.logger.Warn("skills not listed", "err", err)
		return nil
	}
	return skills
}

// skillList returns the server's skills as last listed. The slice is
// shared: callers must not modify it.
func (s *managedServer) skillList() []skillEntry {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.skills
}

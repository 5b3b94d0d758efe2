package main

import (
	"context"
	"fmt"
	"slices"
)

// This file holds "harnessd mcp skills": the skills the servers list
// (skills extension), without reading any skill's files.

const mcpSkillsUsage = `Usage: harnessd mcp skills [SERVER] [flags] [-- COMMAND ARGS...]

Connects every configured MCP server (or SERVER alone, or the one given by
--url or after --) and prints the skills each lists: name, description,
SKILL.md URI and file count. No skill file is read. Exits 1 if a server
failed.

`

// A skillsView is one server of mcp skills --json.
type skillsView struct {
	Name   string        `json:"name"`
	Status string        `json:"status"`
	Error  string        `json:"error,omitempty"`
	Skills []statusSkill `json:"skills"`
}

// mcpSkills implements "harnessd mcp skills".
func (a *app) mcpSkills(ctx context.Context, args []string) error {
	var f mcpFlags
	flagArgs, command := splitCommand(args)
	var only string
	if len(flagArgs) > 0 && !isFlag(flagArgs[0]) {
		only, flagArgs = flagArgs[0], flagArgs[1:]
	}
	fs := a.mcpFlagSet("mcp skills", mcpSkillsUsage, &f)
	logger, workspace, err := f.parse(fs, flagArgs, a.stderr)
	if err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError("mcp skills: unexpected argument %q (one SERVER at most; a server command goes after --)", fs.Arg(0))
	}
	if only != "" && (f.url != "" || len(command) > 0) && !flagGiven(fs, "name") {
		f.name = only
	}
	servers, model, err := a.mcpServers(&f, command, logger, workspace)
	if err != nil {
		return err
	}
	if only != "" {
		i := slices.IndexFunc(servers, func(s serverConfig) bool { return s.Name == only })
		if i < 0 {
			return usageError("mcp skills: no server named %q is configured (see harnessd mcp list)", only)
		}
		servers = servers[i : i+1]
	}
	reg, err := connectForCommand(ctx, servers, logger, a.getenv, commandInput(nil, a.stderr, model, a.getenv, logger))
	if err != nil {
		return err
	}
	defer reg.close()
	views, failed := skillViews(reg.statuses())
	if f.json {
		if err := printJSON(a, map[string]any{"servers": views}); err != nil {
			return err
		}
	} else {
		for _, v := range views {
			printSkills(a, v)
		}
	}
	if failed > 0 {
		return &exitError{code: 1, err: fmt.Errorf("%d of %d servers failed", failed, len(views))}
	}
	return nil
}

// skillViews returns the skills view of each status and how many servers
// failed (disabled ones do not count).
func skillViews(statuses []serverStatus) ([]skillsView, int) {
	failed := 0
	views := make([]skillsView, 0, len(statuses))
	for _, st := range statuses {
		if st.Status != statusReady && st.Status != statusDisabled {
			failed++
		}
		v := skillsView{Name: st.Name, Status: st.Status, Error: st.Error, Skills: st.Skills}
		if v.Skills == nil {
			v.Skills = []statusSkill{}
		}
		views = append(views, v)
	}
	return views, failed
}

// printSkills writes one server's skills as aligned text.
func printSkills(a *app, v skillsView) {
	fmt.Fprintf(a.stdout, "%s  %s  %d skills\n", v.Name, v.Status, len(v.Skills))
	if v.Error != "" {
		fmt.Fprintf(a.stdout, "  error: %s\n", v.Error)
	}
	width := 0
	for _, s := range v.Skills {
		width = max(width, len(s.Name))
	}
	for _, s := range v.Skills {
		files := fmt.Sprintf("%d files", s.Files)
		if s.Files < 0 {
			files = "dynamic"
		}
		fmt.Fprintf(a.stdout, "  %-*s  %s  %s (%s)\n", width, s.Name, oneLine(s.Description, 100), s.URI, files)
	}
}

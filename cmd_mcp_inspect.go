package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"slices"
)

// This file holds the mcp commands that look into one server without a
// model: mcp resources and mcp read.

const mcpResourcesUsage = `Usage: harnessd mcp resources NAME [flags] [-- COMMAND ARGS...]

Connects server NAME (configured, or given by --url or after -- with
--name NAME) and lists its resources: URI, name, MIME type, description.

`

const mcpReadUsage = `Usage: harnessd mcp read NAME URI [flags] [-- COMMAND ARGS...]

Connects server NAME and reads the resource URI, printing its text (a
binary resource is summarised; --json prints the whole result).

`

// mcpResources implements "harnessd mcp resources".
func (a *app) mcpResources(ctx context.Context, args []string) error {
	c, done, err := a.connectOne(ctx, "mcp resources", mcpResourcesUsage, args, 0)
	if err != nil {
		return err
	}
	defer done()
	resources, err := c.client.listResources(ctx)
	if err != nil {
		return fmt.Errorf("mcp resources: server %q: %w", c.name, err)
	}
	if c.flags.json {
		if resources == nil {
			resources = []resourceInfo{}
		}
		return printJSON(a, map[string]any{"resources": resources})
	}
	for _, r := range resources {
		line := r.URI
		for _, s := range []string{r.Name, r.MIMEType, oneLine(r.Description, 100)} {
			if s != "" {
				line += "  " + s
			}
		}
		fmt.Fprintln(a.stdout, line)
	}
	return nil
}

// mcpRead implements "harnessd mcp read".
func (a *app) mcpRead(ctx context.Context, args []string) error {
	c, done, err := a.connectOne(ctx, "mcp read", mcpReadUsage, args, 1)
	if err != nil {
		return err
	}
	defer done()
	res, err := c.client.readResource(ctx, c.rest[0])
	if err != nil {
		return fmt.Errorf("mcp read: server %q: %s: %w", c.name, c.rest[0], err)
	}
	if c.flags.json {
		return printJSON(a, res)
	}
	for _, body := range res.Contents {
		if body.Blob != "" {
			fmt.Fprintf(a.stdout, "[%s: %s, %d bytes of base64]\n", body.URI, body.MIMEType, len(body.Blob))
			continue
		}
		fmt.Fprintln(a.stdout, body.Text)
	}
	return nil
}

// A oneServer is a connected server of an mcp command and the rest of the
// command's arguments.
type oneServer struct {
	name   string
	client *mcpClient
	flags  mcpFlags
	rest   []string
}

// connectOne parses args of the form NAME ARG... [flags] [-- COMMAND...]
// with nargs ARGs after NAME, connects server NAME, and returns it with a
// function that closes it.
func (a *app) connectOne(ctx context.Context, cmd, usage string, args []string, nargs int) (*oneServer, func(), error) {
	var one oneServer
	flagArgs, command := splitCommand(args)
	var lead []string
	for len(flagArgs) > 0 && len(lead) < nargs+1 && !isFlag(flagArgs[0]) {
		lead, flagArgs = append(lead, flagArgs[0]), flagArgs[1:]
	}
	fs := a.mcpFlagSet(cmd, usage, &one.flags)
	logger, workspace, err := one.flags.parse(fs, flagArgs, a.stderr)
	if err != nil {
		return nil, nil, err
	}
	lead = append(lead, fs.Args()...)
	if len(lead) != nargs+1 {
		return nil, nil, usageError("%s: want %d arguments, got %d (see harnessd %s --help)", cmd, nargs+1, len(lead), cmd)
	}
	one.name, one.rest = lead[0], lead[1:]
	if (one.flags.url != "" || len(command) > 0) && !flagGiven(fs, "name") {
		one.flags.name = one.name
	}
	servers, model, err := a.mcpServers(&one.flags, command, logger, workspace)
	if err != nil {
		return nil, nil, err
	}
	i := slices.IndexFunc(servers, func(s serverConfig) bool { return s.Name == one.name })
	if i < 0 {
		return nil, nil, usageError("%s: no server named %q is configured (see harnessd mcp list)", cmd, one.name)
	}
	if !servers[i].Enabled {
		return nil, nil, fmt.Errorf("%s: server %q is disabled by enabled = false (%s); set enabled = true to use it", cmd, one.name, servers[i].Source)
	}
	reg, err := connectForCommand(ctx, servers[i:i+1], logger, a.getenv, commandInput(nil, a.stderr, model, a.getenv, logger))
	if err != nil {
		return nil, nil, err
	}
	one.client, err = reg.server(one.name).current()
	if err != nil {
		reg.close()
		return nil, nil, fmt.Errorf("%s: %w", cmd, err)
	}
	return &one, reg.close, nil
}

// flagGiven reports whether the command line set the flag name.
func flagGiven(fs *flag.FlagSet, name string) bool {
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == name })
	return given
}

// isFlag reports whether arg looks like a flag.
func isFlag(arg string) bool { return len(arg) > 1 && arg[0] == '-' }

// printJSON prints v as indented JSON on stdout.
func printJSON(a *app, v any) error {
	enc := json.NewEncoder(a.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

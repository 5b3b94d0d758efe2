package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
)

// This file holds harnessd mcp import: the servers of another MCP
// client's file (config_import.go converts them) written into harnessd's
// configuration.

// mcpImport implements "harnessd mcp import".
func (a *app) mcpImport(ctx context.Context, args []string) error {
	var f editFlags
	var dryRun bool
	fs := newFlagSet("mcp import", a.stderr, mcpImportUsage)
	f.register(fs, a.getenv)
	fs.BoolVar(&f.replace, "replace", false, "overwrite servers of the same names")
	fs.BoolVar(&dryRun, "dry-run", false, "print the tables instead of writing them")
	_, workspace, err := f.parse(fs, args, a.stderr)
	if err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return usageError("mcp import: want one FILE, got %d arguments (see harnessd mcp import --help)", fs.NArg())
	}
	source := fs.Arg(0)
	data, err := os.ReadFile(source)
	if err != nil {
		return usageError("mcp import: %v", err)
	}
	imported, err := importServers(source, data)
	if err != nil {
		return usageError("mcp import: %v", err)
	}
	servers := make(map[string]rawServer)
	var names []string
	for _, imp := range imported {
		if imp.err != nil {
			fmt.Fprintf(a.stdout, "not converted %q: %v\n", imp.name, imp.err)
			continue
		}
		fmt.Fprintf(a.stdout, "converted %q (%s)\n", imp.name, describeRaw(imp.raw))
		for _, n := range imp.notes {
			fmt.Fprintf(a.stdout, "  not converted: %s\n", n)
		}
		for _, w := range unsetVarWarnings(imp.raw, a.getenv) {
			fmt.Fprintf(a.stderr, "warning: %s\n", w)
		}
		servers[imp.name] = imp.raw
		names = append(names, imp.name)
	}
	if len(names) == 0 {
		return &exitError{code: 1, err: fmt.Errorf("mcp import: no server of %s could be converted", source)}
	}
	file, err := configFileForScope(f.scope, workspace, a.getenv)
	if err != nil {
		return usageError("%v", err)
	}
	if dryRun {
		for i, n := range names {
			if i > 0 {
				fmt.Fprintln(a.stdout)
			}
			io.WriteString(a.stdout, serverTOML(n, servers[n]))
		}
		// The write's refusals too (names the file has, names that
		// clash), so that a dry run that passes would write.
		_, _, err := planSplice(file, servers, names, f.replace)
		return spliceHint(err)
	}
	if _, err := spliceServers(file, servers, names, f.replace); err != nil {
		return spliceHint(err)
	}
	fmt.Fprintf(a.stdout, "wrote %d %s to %s\n", len(names), plural(len(names), "server"), file)
	a.tellDaemon(ctx, file)
	return nil
}

// describeRaw says in a few words what a raw server runs.
func describeRaw(raw rawServer) string {
	if raw.Command != "" {
		return "stdio: " + strings.Join(append([]string{raw.Command}, raw.Args...), " ")
	}
	t := transportHTTP
	if raw.Transport != nil {
		t = *raw.Transport
	}
	return t + ": " + raw.URL
}

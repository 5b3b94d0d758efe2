package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// This file holds the problems of one server that only the machine it runs
// on decides: a ${VAR} that harnessd's environment does not set, a command
// not found on PATH, a cwd that does not exist. Such a server is valid
// configuration: it fails alone (status failed, with the problem), every
// other server starts, and harnessd check warns of it.

// An unsetVar is a ${NAME} without default, in one field of a server,
// whose variable was not set when the configuration was read.
type unsetVar struct {
	Field string // as in errors: "url", "headers.Authorization", "args[1]"
	Name  string // the variable
}

// String says where the variable is used and what to do.
func (u unsetVar) String() string {
	return fmt.Sprintf("%s: %v", u.Field, &unsetVarError{name: u.Name})
}

// An unsetVarsError is why a server with unset variables is not started:
// the first one, and how many more there are. Retrying cannot help until
// the configuration or the environment changes (a restart or a reload).
type unsetVarsError struct{ vars []unsetVar }

func (e *unsetVarsError) Error() string {
	msg := e.vars[0].String()
	if n := len(e.vars) - 1; n > 0 {
		msg += fmt.Sprintf(" (and %d more %s: harnessd check lists them)", n, plural(n, "variable"))
	}
	return msg
}

// unsetErr returns an *unsetVarsError when cfg uses variables that were not
// set, or nil.
func (cfg serverConfig) unsetErr() error {
	if len(cfg.Unset) == 0 {
		return nil
	}
	return &unsetVarsError{vars: cfg.Unset}
}

// isUnsetVars reports whether err says a server uses unset variables.
func isUnsetVars(err error) bool {
	var u *unsetVarsError
	return errors.As(err, &u)
}

// launchProblems returns what keeps the stdio server cfg from starting on
// this machine now, each as "field: problem; what to do": its cwd not a
// directory, its command not found. path is the PATH that resolves a
// command without a "/" (harnessd's own, as exec uses it); a relative
// command with a "/" is resolved against cwd. Other transports have none.
func (cfg serverConfig) launchProblems(path string) []string {
	if cfg.Transport != transportStdio || cfg.Command == "" || len(cfg.Unset) > 0 {
		return nil
	}
	var problems []string
	if cfg.Cwd != "" {
		if info, err := os.Stat(cfg.Cwd); err != nil || !info.IsDir() {
			// Without it a relative command cannot be looked for either.
			return []string{fmt.Sprintf("cwd %q is not a directory; create it or fix the server's cwd", cfg.Cwd)}
		}
	}
	if problem := commandProblem(cfg.Command, cfg.Cwd, path); problem != "" {
		problems = append(problems, problem)
	}
	return problems
}

// commandProblem says why command cannot be run, or "" when it can: a
// name without "/" is looked for in the absolute directories of path (as
// exec.LookPath does, which refuses relative ones), a path is taken
// relative to cwd.
func commandProblem(command, cwd, path string) string {
	if strings.Contains(command, "/") {
		file := command
		if !filepath.IsAbs(file) && cwd != "" {
			file = filepath.Join(cwd, file)
		}
		switch err := executable(file); {
		case errors.Is(err, fs.ErrNotExist):
			return fmt.Sprintf("command %q does not exist; install it or fix the server's command", command)
		case err != nil:
			return fmt.Sprintf("command %q: %v; fix the server's command", command, err)
		}
		return ""
	}
	for _, dir := range filepath.SplitList(path) {
		if filepath.IsAbs(dir) && executable(filepath.Join(dir, command)) == nil {
			return ""
		}
	}
	return fmt.Sprintf("command %q is not found on PATH (%s); install it, or write its full path", command, path)
}

// executable returns nil if file is a regular file someone may execute,
// else why not (wrapping fs.ErrNotExist when it does not exist).
func executable(file string) error {
	info, err := os.Stat(file)
	switch {
	case err != nil:
		var pe *fs.PathError
		if errors.As(err, &pe) {
			return pe.Err // the file is named by the caller
		}
		return err
	case info.IsDir():
		return errors.New("is a directory")
	case info.Mode().Perm()&0o111 == 0:
		return errors.New("is not executable (chmod +x it)")
	}
	return nil
}

// serverWarnings returns a line for every problem of the enabled servers
// that only this machine decides (unset variables, a command or cwd
// missing), each naming the server's source and the server: what harnessd
// check warns of. getenv gives the PATH.
func serverWarnings(servers []serverConfig, getenv func(string) (string, bool)) []string {
	path, _ := getenv("PATH")
	var lines []string
	for _, s := range servers {
		if !s.Enabled {
			continue
		}
		prefix := fmt.Sprintf("%s: server %q: ", s.Source, s.Name)
		for _, u := range s.Unset {
			lines = append(lines, prefix+u.String())
		}
		for _, p := range s.launchProblems(path) {
			lines = append(lines, prefix+p)
		}
	}
	return lines
}

// unsetVarWarnings returns a line for each variable that raw, a server
// about to be written to a file, uses without default and that getenv
// does not set: it will fail to start unless the variable is set where
// harnessd runs.
func unsetVarWarnings(raw rawServer, getenv func(string) (string, bool)) []string {
	s, _ := buildServer("", originGlobal, "", raw, getenv) // the shape was checked before
	var lines []string
	for _, u := range s.Unset {
		lines = append(lines, fmt.Sprintf("server %q: %s: ${%s} is not set in this environment; set it where harnessd runs, or the server will fail to start", raw.Name, u.Field, u.Name))
	}
	return lines
}

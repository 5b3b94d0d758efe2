package main

import (
	"errors"
	"fmt"
	"strings"
)

// This file holds the expansion of ${VAR} placeholders in configuration
// values (command, args, url, cwd, roots, env and headers).

// expandVars replaces ${NAME} and ${NAME:-default} in s with values from
// getenv; the default applies when NAME is unset or empty and is not itself
// expanded. "$$" is a literal "$". A "$" before a letter or "_" is an error
// (almost always a forgotten brace); any other "$" is literal. A nil getenv
// forbids ${...}. An unset variable without default is an *unsetVarError.
// Errors name variables but never values. It also returns the text each
// ${NAME} whose name says it is secret (isSecretName) put in, its default
// included, for the redactor.
func expandVars(s string, getenv func(string) (string, bool)) (string, []string, error) {
	if !strings.Contains(s, "$") {
		return s, nil, nil
	}
	var b strings.Builder
	var secrets []string
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		next := rune(s[i+1])
		switch {
		case next == '$':
			b.WriteByte('$')
			i++
		case next == '{':
			end := strings.IndexByte(s[i+2:], '}')
			if end < 0 {
				return "", nil, errors.New("unterminated \"${\"; close it with \"}\" or write \"$$\" for a literal \"$\"")
			}
			name, def, hasDef := strings.Cut(s[i+2:i+2+end], ":-")
			if !isVarName(name) {
				return "", nil, errors.New("invalid variable name in \"${...}\"; use letters, digits and \"_\", not starting with a digit")
			}
			if getenv == nil {
				return "", nil, fmt.Errorf("${%s}: a per-run server cannot read harnessd's environment; put the value itself in the request", name)
			}
			v, ok := getenv(name)
			switch {
			case hasDef && v == "":
				v = def
			case !ok:
				return "", nil, &unsetVarError{name: name}
			}
			b.WriteString(v)
			if isSecretName(name) && v != "" {
				secrets = append(secrets, v)
			}
			i += 2 + end
		case next == '_' || isAlnum(next) && !('0' <= next && next <= '9'):
			return "", nil, errors.New("\"$\" followed by a name is not expanded; write ${NAME} to expand a variable or \"$$\" for a literal \"$\"")
		default:
			b.WriteByte('$')
		}
	}
	return b.String(), secrets, nil
}

// workspaceVar names the workspace in harnessd's environment and in
// configuration values: ${HARNESS_WORKSPACE}.
const workspaceVar = "HARNESS_WORKSPACE"

// withWorkspace returns getenv with workspaceVar answering workspace, the
// absolute directory harnessd works in (--workspace, else
// HARNESS_WORKSPACE, else the current directory), so that
// roots = ["${HARNESS_WORKSPACE}"] means the workspace however it was
// given. Every other name is getenv's.
func withWorkspace(getenv func(string) (string, bool), workspace string) func(string) (string, bool) {
	return func(name string) (string, bool) {
		if name == workspaceVar {
			return workspace, true
		}
		return getenv(name)
	}
}

// An unsetVarError is expandVars' error for a ${NAME} without default whose
// variable is not set: a problem of the environment harnessd runs in, not
// of the text.
type unsetVarError struct{ name string }

func (e *unsetVarError) Error() string {
	return fmt.Sprintf("variable %s is not set; set it in harnessd's environment or write ${%s:-default}", e.name, e.name)
}

// isVarName reports whether name is a valid environment variable name.
func isVarName(name string) bool {
	for i, c := range name {
		if !isAlnum(c) && c != '_' || i == 0 && '0' <= c && c <= '9' {
			return false
		}
	}
	return name != ""
}

package main

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
)

// This file holds harnessd audit verify: the check of the audit trail's
// chain (audit.go) that names the first line edited or removed.

const auditUsage = `Usage: harnessd audit verify [flags]

Checks the audit trail in $HARNESS_HOME/audit: every line must carry the
SHA-256 of the line before it, sequence numbers must follow each other,
and audit/head must name the last line. Prints how many records it read
and exits 0, or names the first file and line where the chain breaks and
exits 1. The oldest day kept is trusted as the start of the chain (older
days may have been removed by [audit] max_age or max_bytes).

Flags:
`

// audit runs harnessd audit SUBCOMMAND.
func (a *app) audit(_ context.Context, args []string) error {
	if len(args) == 0 || args[0] != "verify" {
		if len(args) > 0 && (args[0] == "help" || args[0] == "-h" || args[0] == "--help") {
			fmt.Fprint(a.stdout, auditUsage)
			return nil
		}
		return usageError("audit: want the subcommand verify (harnessd audit verify)")
	}
	fs := newFlagSet("audit verify", a.stderr, auditUsage)
	if err := parseFlags(fs, args[1:]); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError("audit verify: unexpected argument %q", fs.Arg(0))
	}
	home, err := defaultHome(a.getenv)
	if err != nil {
		return usageError("%v", err)
	}
	dir := filepath.Join(home, "audit")
	sum, err := verifyAudit(dir)
	var broken *auditBreak
	if errors.As(err, &broken) {
		return &exitError{code: 1, err: err}
	}
	if err != nil {
		return err
	}
	if sum.Records == 0 {
		fmt.Fprintf(a.stdout, "audit trail %s: no records yet\n", dir)
		return nil
	}
	fmt.Fprintf(a.stdout, "audit trail ok: %d %s in %d %s, %s to %s\n", sum.Records, plural(sum.Records, "record"),
		sum.Files, plural(sum.Files, "file"), sum.First.Format("2006-01-02T15:04:05Z"), sum.Last.Format("2006-01-02T15:04:05Z"))
	return nil
}

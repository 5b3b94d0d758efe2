package main

import (
	"errors"
	"fmt"
	"time"
)

// This file holds the [audit] table: whether harnessd keeps its audit
// trail (audit.go) and how much of it, by age and by size.

// Retention defaults of the audit trail: a quarter, and a gigabyte.
const (
	defaultAuditMaxAge   = 90 * 24 * time.Hour
	defaultAuditMaxBytes = 1 << 30
)

// A tomlAudit is the [audit] table of one config.toml; nil fields were
// not set in that file.
type tomlAudit struct {
	Enabled  *bool   `toml:"enabled"`
	MaxAge   *string `toml:"max_age"`
	MaxBytes *int64  `toml:"max_bytes"`
}

// defaultAudit returns the audit trail's settings when nothing is set.
func defaultAudit() auditSettings {
	return auditSettings{MaxAge: defaultAuditMaxAge, MaxBytes: defaultAuditMaxBytes}
}

// mergeTOMLAudit sets in s what file's [audit] table sets, checked; the
// errors name the file and the field.
func mergeTOMLAudit(file string, t tomlAudit, s *auditSettings) error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, fmt.Errorf("%s: [audit] %s: %s", file, field, fmt.Sprintf(format, args...)))
	}
	if t.Enabled != nil {
		s.Off = !*t.Enabled
	}
	if t.MaxAge != nil {
		d, err := time.ParseDuration(*t.MaxAge)
		if err != nil || d < 0 {
			bad("max_age", "%q is not a duration of at least 0; write one like \"2160h\" (90 days), or \"0\" to keep every day", *t.MaxAge)
		} else {
			s.MaxAge = d
		}
	}
	if t.MaxBytes != nil {
		if *t.MaxBytes < 0 {
			bad("max_bytes", "%d is negative; give the bytes the trail may take, or 0 for no bound", *t.MaxBytes)
		} else {
			s.MaxBytes = *t.MaxBytes
		}
	}
	return errors.Join(errs...)
}

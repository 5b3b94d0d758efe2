package main

import (
	"fmt"
	"runtime/debug"
	"strings"
)

// This file holds what "harnessd version" prints: the version set at link
// time or the module's, the VCS revision and the Go version, all from the
// build information.

// versionText returns the version lines of this binary. info is the build
// information, nil when the binary has none.
func versionText(info *debug.BuildInfo) string {
	version := buildVersion
	goVersion := "unknown"
	revision, modified, when := "unknown", "", ""
	if info != nil {
		if version == "dev" && info.Main.Version != "" && info.Main.Version != "(devel)" {
			version = info.Main.Version
		}
		goVersion = info.GoVersion
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				revision = s.Value
			case "vcs.modified":
				if s.Value == "true" {
					modified = " (modified)"
				}
			case "vcs.time":
				when = " " + s.Value
			}
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "harnessd %s\n", version)
	fmt.Fprintf(&b, "revision %s%s%s\n", revision, when, modified)
	fmt.Fprintf(&b, "go %s\n", goVersion)
	return b.String()
}

// buildInfo returns the binary's build information, or nil.
func buildInfo() *debug.BuildInfo {
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return nil
	}
	return info
}

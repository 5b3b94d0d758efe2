package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// This file holds the programs the tests build once per test binary: the
// harnessd release binary and the fake stdio MCP server.

// A programBuild is one program built once per test binary, in a
// directory TestMain removes at the end.
type programBuild struct {
	pkg  string // the package, relative to the module root
	name string // the binary's file name
	once sync.Once
	dir  string
	bin  string
	err  error
}

var (
	// harnessdBuild is the test binary's one build of harnessd.
	harnessdBuild = programBuild{pkg: ".", name: "harnessd"}
	// fakeServerBuild is the test binary's one build of
	// testdata/fakeserver.
	fakeServerBuild = programBuild{pkg: "./testdata/fakeserver", name: "fakeserver"}
)

// buildHarnessd returns the static release binary (CGO_ENABLED=0, -s -w),
// built on the first call (or from TestMain's start, see startBuilds) into
// a temporary directory and shared by every test after; callers must not
// change or remove it.
func buildHarnessd(t testing.TB) string { return harnessdBuild.get(t) }

// fakeServerBinary returns the fake stdio MCP server, built like
// buildHarnessd's binary.
func fakeServerBinary(t testing.TB) string { return fakeServerBuild.get(t) }

// get returns the binary, built on the first call; it fails t if the
// build failed.
func (b *programBuild) get(t testing.TB) string {
	t.Helper()
	b.once.Do(b.build)
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.bin
}

// startBuilds starts building in the background what the tests will ask
// for, so that the builds overlap the first tests instead of holding up
// the ones that need them: the fake server always (most tests start
// one), harnessd when the whole suite runs (no -run, not -short).
func startBuilds() {
	// Owned by the test binary; each ends when its build does.
	go fakeServerBuild.once.Do(fakeServerBuild.build)
	if flag.Lookup("test.run").Value.String() == "" && !testing.Short() {
		go harnessdBuild.once.Do(harnessdBuild.build)
	}
}

// build builds the binary into a new temporary directory, setting bin or
// err. Both programs build with the same flags, so the second finds the
// standard library the first compiled in the build cache.
func (b *programBuild) build() {
	goTool, err := exec.LookPath("go")
	if err != nil {
		b.err = fmt.Errorf("build %s: %w", b.name, err)
		return
	}
	if b.dir, err = os.MkdirTemp("", b.name+"-build-"); err != nil {
		b.err = fmt.Errorf("build %s: %w", b.name, err)
		return
	}
	b.bin = filepath.Join(b.dir, b.name)
	cmd := exec.Command(goTool, "build", "-trimpath", "-ldflags=-s -w", "-o", b.bin, b.pkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		b.err = fmt.Errorf("CGO_ENABLED=0 go build -o %s %s: %w\n%s", b.bin, b.pkg, err, out)
	}
}

// removeBuilds removes what the builds made, once any build started in
// the background has ended.
func removeBuilds() {
	for _, b := range []*programBuild{&harnessdBuild, &fakeServerBuild} {
		b.once.Do(func() {})
		if b.dir != "" {
			os.RemoveAll(b.dir)
		}
	}
}

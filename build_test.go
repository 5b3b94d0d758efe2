package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"testing"
)

// This file holds the test binary's set-up: TestMain, how many tests run
// at once, and the programs the tests build once per test binary (the
// harnessd release binary and the fake stdio MCP server).

func TestMain(m *testing.M) {
	overlapWaitingTests()
	startBuilds()
	code := m.Run()
	removeBuilds()
	os.Exit(code)
}

// suiteParallel is how many parallel tests run at once when -parallel is
// not given. Most tests wait on subprocesses, sockets and a browser rather
// than on the CPU, so on a machine with few cores more of them than
// GOMAXPROCS (the testing package's default) overlap their waits.
const suiteParallel = 4

// overlapWaitingTests raises -test.parallel to suiteParallel unless the
// command line set it or GOMAXPROCS is already at least that.
func overlapWaitingTests() {
	flag.Parse()
	set := false
	flag.Visit(func(f *flag.Flag) { set = set || f.Name == "test.parallel" })
	if !set && runtime.GOMAXPROCS(0) < suiteParallel {
		flag.Set("test.parallel", strconv.Itoa(suiteParallel))
	}
}

// A programBuild is one program built once per test binary, in a
// directory TestMain removes at the end.
type programBuild struct {
	pkg  string // the package, relative to the module root
	name string // the binary's file name
	once sync.Once
	dir  string // where build put the binary
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
	return b.bin()
}

// bin is the binary's path, once build has made dir.
func (b *programBuild) bin() string { return filepath.Join(b.dir, b.name) }

// startBuilds starts building in the background what the tests will ask
// for, so that the builds overlap the first tests instead of holding up
// the ones that need them: the fake server always (most tests start
// one), then harnessd when the whole suite runs (no -run, not -short).
// One after the other: both build with the same flags, so harnessd's
// finds in the build cache the standard library the fake server's
// compiled. At once, on a cold cache (a fresh CI machine), both compiled
// it: 111 CPU seconds and 61 s until harnessd was built, against 63 and
// 34 in turn (2 cores, 2026-12-06).
func startBuilds() {
	whole := flag.Lookup("test.run").Value.String() == "" && !testing.Short()
	// Owned by the test binary; ends when the builds do.
	go func() {
		fakeServerBuild.once.Do(fakeServerBuild.build)
		if whole {
			harnessdBuild.once.Do(harnessdBuild.build)
		}
	}()
}

// build builds the binary into a new temporary directory, setting dir or
// err.
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
	cmd := exec.Command(goTool, "build", "-trimpath", "-ldflags=-s -w", "-o", b.bin(), b.pkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		b.err = fmt.Errorf("CGO_ENABLED=0 go build -o %s %s: %w\n%s", b.bin(), b.pkg, err, out)
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

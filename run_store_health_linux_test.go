package main

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// This file holds the full-disk test of the run store on a real
// filesystem: a 12 MiB tmpfs the test mounts (as root on Linux).

// smallFilesystem mounts a tmpfs of size (mount(8)'s size=) in a
// temporary directory, unmounted at cleanup, or skips the test where
// mounting is not permitted.
func smallFilesystem(t *testing.T, size string) string {
	t.Helper()
	dir := t.TempDir()
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+size); err != nil {
		t.Skipf("mounting a %s tmpfs is not permitted here (%v): the full disk is covered by TestStoreFullDiskInjected", size, err)
	}
	t.Cleanup(func() {
		// Detached at once, freed when the last file open on it closes: a
		// process another test forks at that moment holds a copy of every
		// descriptor until it execs, which made a plain unmount fail with
		// EBUSY under load.
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// fillFilesystem writes a file in dir until the filesystem is full and
// returns its path.
func fillFilesystem(t *testing.T, dir string) string {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	block := make([]byte, 64<<10)
	for len(block) > 0 {
		if _, err := f.Write(block); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("fill %s: %v", dir, err)
			}
			block = block[:len(block)/2]
		}
	}
	return path
}

// TestStoreFullDiskTmpfs: on a 12 MiB filesystem filled up while the
// log's segment still has space given ahead, run A's lines fill the
// segment, and the next finds no room: the store fails at once (the
// space ahead does not hide it). Run B, ending then, cannot write its end
// and is reported failed with the store's reason (it was reported
// completed, and found failed after a restart, before); new runs get 503
// until the filler is removed. After a restart what was reported is what
// the disk holds.
func TestStoreFullDiskTmpfs(t *testing.T) {
	t.Parallel()
	mnt := smallFilesystem(t, "12m")
	reached := make(chan string)
	gateB, releaseB := newGate()
	bigAnswer := strings.Repeat("a", 300<<10)
	f := newFakeModel(t, providerOpenAI,
		gatedTurn(t, reached, "B", gateB, fakeTurn{Text: "answer B"}),
		fakeTurn{Text: bigAnswer},
		fakeTurn{Text: "answer C"})
	dir := filepath.Join(mnt, "runs")
	store, err := openRunStoreOnceFree(dir, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(store.close)
	store.log.segBytes = 256 << 10 // the first segment keeps its 8 MiB given ahead
	store.log.probeEvery = 0
	at := storeAPI(t, f, store)
	at.runs.opts.Limits.MaxOutputBytes = 1 << 20

	filler := fillFilesystem(t, mnt)
	b := at.postRun(t, "", `{"prompt":"B"}`)
	<-reached
	a := at.postRun(t, "", `{"prompt":"A"}`)
	va := waitRunID(t, at, a)
	// A's end went into the space given ahead when its lines were
	// written at once, else after them, where there is no room.
	if va.Status != runCompleted && !strings.HasPrefix(va.Error, "store: writing the run's end: no space left on device") {
		t.Errorf("run A = %s %q, want completed, or failed with the store's reason", va.Status, va.Error)
	}
	releaseB()
	vb := waitRunID(t, at, b)
	if vb.Status != runFailed || vb.Error != "store: writing the run's end: no space left on device (it had ended completed)" {
		t.Errorf("run B ending on a full disk = %s %q, want failed with the store's reason", vb.Status, vb.Error)
	}
	checkRefused(t, at, dir)

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	c := checkAccepting(t, at, "C")

	stopRuns(t, at.runs)
	m2 := newStoredRuns(t, f, dir, nil)
	for id, want := range map[string]string{a: va.Status, b: runFailed, c: runCompleted} {
		if r := m2.get(id); r == nil || r.view().Status != want {
			t.Errorf("run %s after a restart is not %s", id, want)
		}
	}
	if v := m2.get(a).view(); va.Status == runCompleted && v.Output != bigAnswer {
		t.Errorf("run A's output after a restart is %d bytes, want %d", len(v.Output), len(bigAnswer))
	}
}

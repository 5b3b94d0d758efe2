package main

import (
	"bytes"
	"path/filepath"
	"testing"
)

// TestFollowerAtEndKeepsHistoryInMemory checks that a run kept on disk
// lets its history go from memory only once the followers attached at
// its end are gone, and that those who come later read the same bytes
// from disk.
func TestFollowerAtEndKeepsHistoryInMemory(t *testing.T) {
	t.Parallel()
	gate := make(chan struct{})
	f := newFakeModel(t, providerOpenAI, fakeTurn{Text: "done", Check: func(fakeRequest) error {
		<-gate // the follower is attached
		return nil
	}})
	m := newStoredRuns(t, f, filepath.Join(t.TempDir(), "runs"), nil)
	r, err := m.start(runRequest{Prompt: "hi"}, false)
	if err != nil {
		t.Fatal(err)
	}
	attached := followCursor{}
	r.follow(&attached)
	close(gate)
	<-r.done

	r.mu.Lock()
	inMemory := r.final != nil && r.events != nil
	r.mu.Unlock()
	if !inMemory {
		t.Fatal("the history was let go while a follower was attached")
	}
	kept := followCursor{}
	fromMemory, _, _ := r.follow(&kept)
	r.unfollow(&kept)
	r.unfollow(&attached)
	r.mu.Lock()
	gone := r.events == nil
	r.mu.Unlock()
	if !gone {
		t.Fatal("the history stayed in memory after the last follower left")
	}
	late := followCursor{}
	if frames, _, _ := r.follow(&late); len(frames) != 0 || !late.onDisk {
		t.Fatalf("a follower after the last one left got %d frames from follow, on disk %v; want none, on disk", len(frames), late.onDisk)
	}
	var fromDisk []followFrame
	if err := r.replay(&late, func(ev runEvent) error {
		fromDisk = append(fromDisk, followFrame{ev: ev})
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	r.unfollow(&late)
	if len(fromMemory) < 2 || len(fromDisk) != len(fromMemory) {
		t.Fatalf("followed %d events from memory, %d from disk; want the same, at least 2", len(fromMemory), len(fromDisk))
	}
	for i := range fromMemory {
		if !bytes.Equal(fromMemory[i].ev.frame, fromDisk[i].ev.frame) {
			t.Errorf("event %d: from memory %q, from disk %q", i+1, fromMemory[i].ev.frame, fromDisk[i].ev.frame)
		}
	}
}

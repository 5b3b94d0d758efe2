package main

import (
	"os"
	"slices"
	"sync"
)

// This file holds the run store's pool of run ids whose files exist
// already, empty, with names made durable by one directory fsync for the
// lot. A new run takes its id from the pool, so that accepting it needs
// no directory fsync of its own: its first record's commit to the journal
// is all. One goroutine refills the pool when it runs low; a run that
// finds it empty gets a fresh id, and its commit fsyncs the directory.
// An id taken and not used (the run was refused) has its file removed.
// A file left empty by a stop is removed at the next start, as the file
// of a run never accepted.

const (
	// runIDPoolSize is how many ids the pool holds when full; it is
	// refilled once it is down to half.
	runIDPoolSize = 64
)

// A runIDPool is the store's pool of ids with files. Safe for concurrent
// use.
type runIDPool struct {
	store *runStore
	kick  chan struct{} // 1-buffered: the pool runs low
	stop  chan struct{} // closed by close
	done  chan struct{} // closed when the refiller has returned

	mu sync.Mutex
	// guards free, making and taken
	free   []string
	making []string        // ids whose files are being made
	taken  map[string]bool // ids handed out whose files are not yet used
}

// startIDPool starts the refiller of s's pool, which fills it when the
// first id is taken: a store no run is started on makes no files.
func (s *runStore) startIDPool() {
	p := &runIDPool{store: s, kick: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{}), taken: map[string]bool{}}
	s.pool = p
	go p.refillLoop()
}

// close stops the refiller. The pool's files stay: the next start
// removes them.
func (p *runIDPool) close() {
	close(p.stop)
	<-p.done
}

// refillLoop fills the pool whenever it is kicked, until close.
func (p *runIDPool) refillLoop() {
	defer close(p.done)
	for {
		select {
		case <-p.stop:
			return
		case <-p.kick:
		}
		ids, err := p.make()
		p.mu.Lock()
		p.free = append(p.free, ids...)
		p.making = nil
		p.mu.Unlock()
		if err != nil {
			p.store.logger.Warn("preparing run files failed; runs are accepted with a directory fsync each", "err", err)
		}
	}
}

// make creates the files the pool lacks, empty, and fsyncs the directory
// once, and returns their ids (none on error). While it works, the ids
// are in making, so that load leaves their files alone.
func (p *runIDPool) make() ([]string, error) {
	p.mu.Lock()
	for range runIDPoolSize - len(p.free) {
		p.making = append(p.making, newID("run_"))
	}
	ids := p.making
	p.mu.Unlock()
	var made []string
	var err error
	for _, id := range ids {
		var f *os.File
		if f, err = os.OpenFile(p.store.runPath(id), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600); err != nil {
			break
		}
		f.Close()
		made = append(made, id)
	}
	if len(made) > 0 && err == nil {
		err = syncDir(p.store.dir)
	}
	if err != nil {
		for _, id := range made {
			os.Remove(p.store.runPath(id))
		}
		return nil, err
	}
	return made, nil
}

// take returns the id for a new run: one of the pool's, or a fresh one
// when the pool is empty.
func (p *runIDPool) take() string {
	p.mu.Lock()
	n := len(p.free)
	if n <= runIDPoolSize/2 {
		select {
		case p.kick <- struct{}{}:
		default:
		}
	}
	if n == 0 {
		p.mu.Unlock()
		return newID("run_")
	}
	id := p.free[n-1]
	p.free = p.free[:n-1]
	p.taken[id] = true
	p.mu.Unlock()
	return id
}

// use reports whether id was taken from the pool (its file exists, with
// a durable name), which it now belongs to its run.
func (p *runIDPool) use(id string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	pooled := p.taken[id]
	delete(p.taken, id)
	return pooled
}

// release removes the file of id, taken and not used.
func (p *runIDPool) release(id string) {
	if p.use(id) {
		os.Remove(p.store.runPath(id))
	}
}

// holds reports whether id is the pool's: free, or taken and not yet
// used.
func (p *runIDPool) holds(id string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.taken[id] || slices.Contains(p.free, id) || slices.Contains(p.making, id)
}

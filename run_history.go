package main

import (
	"crypto/sha256"
	"fmt"
	"slices"
	"time"
)

// This file holds how runs meet the store (run_store.go): a run's record
// committed when it is accepted, its events and its transcript appended
// to the store's log as they go, made durable with the terminal event and
// the record before anyone sees the run end; finished runs kept on disk
// rather than in memory; the history loaded at start-up; and retention.

// bodyInMemory is the size above which a finished run's prompt or output
// is read from its record on disk rather than kept in memory.
const bodyInMemory = 4 << 10

// A runDisk is one run's lines in the store's log. It is written by the
// run's writer goroutine alone (run_writer.go) until the terminal event,
// never under the run's mu; then the goroutine finishing the run owns it
// (archive) and the record fields, which others read only once the run's
// done is closed. store, redact and queue are fixed.
type runDisk struct {
	store  *runStore
	redact *liveRedactor // the run's secrets, cut out of what is written
	log    *runLog       // nil for a run loaded from the store
	bytes  int64         // what the run's lines take, once it has ended
	// recordSum is the hash of the last record line written, so that
	// writing the same again is skipped.
	recordSum [sha256.Size]byte
	// queue feeds the writer; nil for a run loaded from the store.
	queue *diskQueue
}

// persistNew creates r's file and commits its first record, so an
// accepted run survives a crash (as interrupted at worst). It does
// nothing without a store.
func (m *runManager) persistNew(r *run) error {
	if m.opts.Store == nil {
		return nil
	}
	d := &runDisk{store: m.opts.Store, redact: r.secrets}
	// The delivery first: a run on disk with a webhook always has it.
	if r.webhook != nil {
		r.webhook.path = d.store.webhookPath(r.id)
		if err := r.webhook.update(func(*webhookRecord) {}); err != nil {
			return fmt.Errorf("run %s: write webhook delivery: %w; check the free space and permissions of %s", r.id, err, d.store.dir)
		}
	}
	l, err := d.store.create(r.view(), d.redact.load())
	if err != nil {
		d.store.remove(r.id)
		return err
	}
	d.log = l
	d.startWriter(r)
	r.disk = d
	return nil
}

// discard closes the log of a run that was refused after persistNew and
// removes the run.
func (d *runDisk) discard(id string) {
	d.queue.stop()
	d.queue.writing.Lock()
	d.log.close()
	d.queue.writing.Unlock()
	d.store.remove(id)
}

// appendLocked hands ev, not the terminal event, to the run's writer,
// which writes it to the log without the run's mu. Called under the
// run's mu, in event order.
func (d *runDisk) appendLocked(ev runEvent) {
	if d == nil || d.queue == nil {
		return
	}
	d.queue.enqueue(diskItem{event: &ev})
}

// stopLocked stops the run's queue after its last event, so that
// writeEnd may write the end; it reports false without a disk or when
// the queue was stopped already (the run was discarded). Called under the
// run's mu, after every other event.
func (d *runDisk) stopLocked() bool {
	return d != nil && d.queue != nil && d.queue.stop()
}

// appendMessageLocked hands one transcript line (redacted JSON, without
// newline) to the run's writer. Called under the run's mu, in order.
func (d *runDisk) appendMessageLocked(line []byte) {
	d.queue.enqueue(diskItem{line: line})
}

// archive appends r's final record v to its lines unless it is the record
// written with the end (the run's servers may leave it unchanged as they
// close), closes its log and returns the view to keep in memory: without
// the prompt and output when they are large (view reads them back from
// disk). It returns nil, keeping everything in memory, when the end did
// not reach the disk or the record could not be written.
func (d *runDisk) archive(r *run, v runView) *runView {
	defer d.log.close()
	if d.log.err != nil {
		return nil
	}
	b := recordLine(v, d.redact.load())
	if sum := sha256.Sum256(b); sum != d.recordSum {
		// Without an fsync of its own (see run_store.go).
		if err := d.log.write(b, false); err != nil {
			r.logger.Error("writing the run's record to disk failed; it is kept in memory only", "err", err)
			return nil
		}
		d.recordSum = sum
	}
	d.bytes = d.store.log.size(r.id)
	if len(v.Prompt) > bodyInMemory || len(v.Output) > bodyInMemory {
		v.Prompt, v.Output = "", ""
	}
	return &v
}

// historyRun returns an ended run loaded from the store.
func historyRun(env *runEnv, s *runStore, stored storedRun) *run {
	v := stored.view
	if v.Tenant == "" {
		v.Tenant = v.Owner // kept before runs had tenants
	}
	r := &run{
		id:        v.ID,
		env:       env,
		logger:    env.logger.With("run", v.ID),
		createdAt: v.CreatedAt,
		req:       runRequest{Owner: v.Owner, Tenant: v.Tenant},
		cancel:    func() {},
		done:      make(chan struct{}),
		changed:   make(chan struct{}),
		status:    v.Status,
		errMsg:    v.Error,
		steps:     v.Steps,
		toolCalls: v.ToolCalls,
		disk:      &runDisk{store: s, bytes: stored.bytes},
	}
	if v.EndedAt != nil {
		r.endedAt = *v.EndedAt
	}
	close(r.done)
	if len(v.Prompt) > bodyInMemory || len(v.Output) > bodyInMemory {
		r.promptHead = promptHead(v.Prompt)
		v.Prompt, v.Output = "", ""
	}
	r.final = &v
	return r
}

// loadHistory keeps the runs on disk, oldest first, ending those a crash
// interrupted. Called once, by newRunManager.
func (m *runManager) loadHistory() {
	stored, err := m.opts.Store.load(time.Now())
	if err != nil {
		m.logger.Error("loading the runs on disk failed; starting without history", "err", err)
		return
	}
	interrupted := 0
	for _, s := range stored {
		if s.view.Error == interruptedError {
			interrupted++
		}
		r := historyRun(m.env, m.opts.Store, s)
		m.runs[r.id] = r
		m.order = append(m.order, r.id)
		m.resumeWebhook(r)
	}
	m.logger.Info("loaded runs from disk", "runs", len(stored), "dir", m.opts.Store.dir)
	if interrupted > 0 {
		m.logger.Warn("runs interrupted when harnessd stopped were marked failed", "runs", interrupted)
	}
}

// pruneEvery is the least time between two applications of retention
// after runs end: each walks every kept run, so a run's end only asks
// for one (pruneSoon).
const pruneEvery = 50 * time.Millisecond

// pruneSoon asks the pruner to apply retention: at once when it last did
// more than pruneEvery ago, else then.
func (m *runManager) pruneSoon() {
	select {
	case m.pruneKick <- struct{}{}:
	default:
	}
}

// pruneLoop applies retention when asked, at most once per pruneEvery.
// Owned by the run manager; exits at shutdown.
func (m *runManager) pruneLoop() {
	defer close(m.pruned)
	for {
		select {
		case <-m.ctx.Done():
			return
		case <-m.pruneKick:
		}
		m.prune()
		select {
		case <-m.ctx.Done():
			return
		case <-time.After(pruneEvery):
		}
	}
}

// prune drops the runs retention expires, from memory and from disk.
func (m *runManager) prune() {
	m.mu.Lock()
	ids := m.pruneLocked()
	m.mu.Unlock()
	if m.opts.Store != nil {
		m.opts.Store.removeAll(ids)
	}
}

// pruneLocked drops from memory the oldest finished runs beyond the
// retention and returns their ids, for their files to be removed.
func (m *runManager) pruneLocked() []string {
	kept := make([]keptRun, 0, len(m.order))
	for _, id := range m.order {
		r := m.runs[id]
		k := keptRun{id: id}
		select {
		case <-r.done:
			// A run whose webhook is still pending is kept until it is not.
			k.ended = !r.webhook.pending()
			r.mu.Lock()
			k.endedAt = r.endedAt
			if r.disk != nil {
				k.bytes = r.disk.bytes
			}
			r.mu.Unlock()
		default:
		}
		kept = append(kept, k)
	}
	now := time.Now()
	if !m.opts.Retention.mayExpire(kept, now) {
		return nil
	}
	ids := m.opts.Retention.expired(m.groupConversationsLocked(kept), now)
	if len(ids) == 0 {
		return nil
	}
	ids = m.expandConversationsLocked(ids)
	for _, id := range ids {
		delete(m.runs, id)
	}
	m.order = slices.DeleteFunc(m.order, func(id string) bool { _, ok := m.runs[id]; return !ok })
	return ids
}

// mayExpire reports whether expired could return any of runs, grouped
// or not: false when the ended ones, each counted alone, stay within
// every bound (grouping only lowers the count and bytes of what is ended
// and never makes an end older). A cheap test before grouping: expired
// allocates nothing when it returns nothing.
func (k retention) mayExpire(runs []keptRun, now time.Time) bool {
	return len(k.expired(runs, now)) > 0
}

package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// This file holds conversations: chains of runs in which each run
// continues the messages of the ones before it. A conversation is its runs:
// each run's record names it, each run's transcript holds its messages,
// and its first run's record gives its owner, tenant and creation time (retention
// keeps or drops a conversation's runs together, so its first run is kept
// as long as it is). Here: joining a run to its conversation (one active
// run at a time), loading at start-up, deletion, listing, and retention.

// conversationExt is the extension of the record an older harnessd kept
// of each conversation in the runs directory, read when it is there.
const conversationExt = ".conversation"

// A conversation is a chain of runs. Its id and createdAt are fixed; the
// run manager's mu guards the rest.
type conversation struct {
	id        string
	createdAt time.Time
	owner     string // the key that started its first run; "" with auth off
	// tenant is who it belongs to: its first run's tenant, which every
	// run that joins it takes.
	tenant string
	// runs are its runs in order; only the last may be active.
	runs []*run
	// history is what its runs send the model, kept for the next run.
	history *conversationHistory
}

// A runConversation is what a run knows of its conversation, fixed when
// the run joins it.
type runConversation struct {
	id string
	// earlier are the conversation's runs before this one, all ended when
	// it joined.
	earlier []*run
	// history is the conversation's, shared by its runs.
	history *conversationHistory
}

// A conversationRecord is a conversation's record on disk.
type conversationRecord struct {
	ID        string    `json:"id"`
	Owner     string    `json:"owner"`
	CreatedAt time.Time `json:"created_at"`
}

// A conversationTenantError refuses a run of one tenant for a conversation
// of another when the request may not cross tenants (a schedule's). The
// API answers 404, like for a conversation that is not kept.
type conversationTenantError struct {
	conversation, tenant, runTenant string
}

func (e *conversationTenantError) Error() string {
	return fmt.Sprintf("conversation %q: belongs to tenant %q, not to this run's tenant %q: a run may join only a conversation of its own tenant; leave conversation_id out, or give the schedule the conversation's tenant (tenant = %q)",
		e.conversation, e.tenant, e.runTenant, e.tenant)
}

// A conversationBusyError refuses a run for a conversation whose run is
// still active; the API answers 409 conversation_busy. An empty run names
// none (the caller does not see it).
type conversationBusyError struct {
	conversation, run, status string
}

func (e *conversationBusyError) Error() string {
	if e.run == "" {
		return fmt.Sprintf("conversation %q: a run of it is still active; try again once it has ended", e.conversation)
	}
	return fmt.Sprintf("conversation %q: run %s is still %s; a conversation takes one run at a time: wait for it to end (GET /v1/runs/%s/events) or cancel it (POST /v1/runs/%s/cancel)",
		e.conversation, e.run, e.status, e.run, e.run)
}

// A conversationNotFoundError names a conversation that is not kept; the
// API answers 404.
type conversationNotFoundError struct{ id string }

func (e *conversationNotFoundError) Error() string {
	return fmt.Sprintf("conversation %q: not found (conversations are listed at GET /v1/conversations; leave conversation_id out to start a new one)", e.id)
}

// conversationID returns the id of r's conversation, "" for a run kept by
// an older harnessd.
func (r *run) conversationID() string {
	if r.conv == nil {
		return ""
	}
	return r.conv.id
}

// joinConversation makes r the next run of the conversation its request
// names, or the first of a new one of its request's owner and tenant. A
// run joining a conversation of another tenant takes the conversation's
// tenant when its request may cross tenants (AnyTenant: an admin's), and
// is refused with a *conversationTenantError otherwise. It returns a
// *conversationNotFoundError, or a *conversationBusyError while the
// conversation's last run is active. A run that joined and is then
// refused must leave.
func (m *runManager) joinConversation(r *run) error {
	m.mu.Lock()
	id := r.req.ConversationID
	if id == "" {
		c := &conversation{id: newID("conv_"), owner: r.req.Owner, tenant: r.req.Tenant, createdAt: r.createdAt, runs: []*run{r}, history: &conversationHistory{}}
		m.conversations[c.id] = c
		r.conv = &runConversation{id: c.id, history: c.history}
		m.mu.Unlock()
		return nil
	}
	defer m.mu.Unlock()
	c := m.conversations[id]
	if c == nil {
		return &conversationNotFoundError{id: id}
	}
	if c.tenant != r.req.Tenant {
		if !r.req.AnyTenant {
			return &conversationTenantError{conversation: id, tenant: c.tenant, runTenant: r.req.Tenant}
		}
		r.req.Tenant = c.tenant // not yet seen by anyone: no view was taken
	}
	last := c.runs[len(c.runs)-1]
	if status := last.summary().Status; !isTerminal(status) {
		return &conversationBusyError{conversation: id, run: last.id, status: status}
	}
	r.conv = &runConversation{id: id, earlier: slices.Clone(c.runs), history: c.history}
	c.runs = append(c.runs, r)
	return nil
}

// leaveConversation takes r, refused after it joined, out of its
// conversation, and drops a conversation it alone was in.
func (m *runManager) leaveConversation(r *run) {
	m.mu.Lock()
	c := m.conversations[r.conversationID()]
	if c == nil {
		m.mu.Unlock()
		return
	}
	c.runs = slices.DeleteFunc(c.runs, func(o *run) bool { return o == r })
	empty := len(c.runs) == 0
	if empty {
		delete(m.conversations, c.id)
	}
	m.mu.Unlock()
	if empty && m.opts.Store != nil {
		m.opts.Store.remove(c.id)
	}
}

// conversation returns the conversation with id, or nil. Its fields but
// id and createdAt must only be read under m.mu: use conversationHead and
// conversationView.
func (m *runManager) conversation(id string) *conversation {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.conversations[id]
}

// A conversationView is a conversation as the API shows it.
type conversationView struct {
	ID        string    `json:"id"`
	Owner     string    `json:"owner"`
	Tenant    string    `json:"tenant"`
	CreatedAt time.Time `json:"created_at"`
	// UpdatedAt is when its last run ended, or started (or was created)
	// while it runs.
	UpdatedAt time.Time `json:"updated_at"`
	// Status is its last run's status.
	Status string `json:"status"`
	// Title is its first run's title (the first one kept that the
	// reader sees).
	Title string   `json:"title"`
	Runs  []string `json:"runs"`
	// Messages are its runs' transcripts in order (GET
	// /v1/conversations/{id} only).
	Messages []json.RawMessage `json:"messages,omitempty"`
}

// A tenantFilter says whether the caller sees what belongs to a tenant
// (authInfo.sees); nil sees everything.
type tenantFilter func(tenant string) bool

// conversationRuns returns c's runs that sees lets through, in order: a
// conversation may hold runs of other tenants (an older harnessd let a
// schedule join one), which its reader must neither see nor remove.
func (m *runManager) conversationRuns(c *conversation, sees tenantFilter) []*run {
	m.mu.Lock()
	defer m.mu.Unlock()
	return visibleRuns(c.runs, sees)
}

// conversationHead returns c's owner and tenant.
func (m *runManager) conversationHead(c *conversation) (owner, tenant string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return c.owner, c.tenant
}

// tenantOf returns c's tenant.
func (m *runManager) tenantOf(c *conversation) string {
	_, tenant := m.conversationHead(c)
	return tenant
}

// visibleRuns returns a new slice of the runs that sees lets through.
func visibleRuns(runs []*run, sees tenantFilter) []*run {
	out := make([]*run, 0, len(runs))
	for _, r := range runs {
		if sees == nil || sees(r.req.Tenant) {
			out = append(out, r)
		}
	}
	return out
}

// conversationView returns c without its messages, as one who sees only
// the runs sees lets through: its runs, status and update time are theirs.
func (m *runManager) conversationView(c *conversation, sees tenantFilter) conversationView {
	v := conversationView{ID: c.id, CreatedAt: c.createdAt, UpdatedAt: c.createdAt, Runs: []string{}}
	v.Owner, v.Tenant = m.conversationHead(c)
	for _, r := range m.conversationRuns(c, sees) {
		s := r.summary()
		v.Runs = append(v.Runs, r.id)
		v.Status = s.Status
		if len(v.Runs) == 1 {
			v.Title = s.Title
		}
		for _, t := range []*time.Time{&s.CreatedAt, s.StartedAt, s.EndedAt} {
			if t != nil && t.After(v.UpdatedAt) {
				v.UpdatedAt = *t
			}
		}
	}
	return v
}

// listConversations returns every kept conversation, newest first (by
// compareAge).
func (m *runManager) listConversations() []*conversation {
	m.mu.Lock()
	out := make([]*conversation, 0, len(m.conversations))
	for _, c := range m.conversations {
		out = append(out, c)
	}
	m.mu.Unlock()
	slices.SortFunc(out, func(a, b *conversation) int { return compareAge(b.createdAt, b.id, a.createdAt, a.id) })
	return out
}

// conversationMessages returns the messages of c's runs that sees lets
// through, in order, each with the id of its run added as run_id.
func (m *runManager) conversationMessages(c *conversation, sees tenantFilter) ([]json.RawMessage, error) {
	out := []json.RawMessage{}
	for _, r := range m.conversationRuns(c, sees) {
		msgs, _, err := r.messages()
		if err != nil {
			return nil, fmt.Errorf("conversation %s: run %s: read transcript: %w", c.id, r.id, err)
		}
		prefix := `{"run_id":` + string(mustMarshal(r.id)) + ","
		for _, msg := range msgs {
			if len(msg) < 2 || msg[0] != '{' {
				continue
			}
			out = append(out, json.RawMessage(prefix+string(msg[1:])))
		}
	}
	return out, nil
}

// mustMarshal returns the JSON of a string.
func mustMarshal(s string) []byte {
	b, _ := json.Marshal(s)
	return b
}

// deleteConversation forgets the runs of conversation id that sees lets
// through and removes them from disk, with the record an older harnessd
// kept of it; the conversation goes with its last run, else it stays with
// the runs of others, and belongs to the first of them. It returns a
// *conversationNotFoundError, or a *conversationBusyError while a run of
// it is active.
func (m *runManager) deleteConversation(id string, sees tenantFilter) error {
	m.mu.Lock()
	c := m.conversations[id]
	if c == nil {
		m.mu.Unlock()
		return &conversationNotFoundError{id: id}
	}
	last := c.runs[len(c.runs)-1]
	if status := last.summary().Status; !isTerminal(status) {
		m.mu.Unlock()
		busy := &conversationBusyError{conversation: id}
		if sees == nil || sees(last.req.Tenant) {
			busy.run, busy.status = last.id, status
		}
		return busy
	}
	gone := visibleRuns(c.runs, sees)
	ids := make([]string, 0, len(gone)+1)
	for _, r := range gone {
		ids = append(ids, r.id)
		delete(m.runs, r.id)
	}
	c.runs = slices.DeleteFunc(c.runs, func(r *run) bool { _, ok := m.runs[r.id]; return !ok })
	if len(c.runs) == 0 {
		delete(m.conversations, id)
	} else {
		c.owner, c.tenant = c.runs[0].req.Owner, c.runs[0].req.Tenant
	}
	m.order = slices.DeleteFunc(m.order, func(id string) bool { _, ok := m.runs[id]; return !ok })
	m.mu.Unlock()
	if m.opts.Store != nil {
		if err := m.opts.Store.purge(append(ids, id)); err != nil {
			m.logger.Error("removing the deleted conversation's runs from disk failed", "conversation", id, "err", err)
		}
	}
	m.logger.Info("conversation deleted", "conversation", id, "runs", len(ids))
	return nil
}

// loadConversations rebuilds the conversations of the runs loadHistory
// kept (oldest first), from their records: a conversation takes its owner,
// tenant and creation time from its first run, or its owner and creation
// time from the record an older
// harnessd kept of it. Such a record without runs (its runs expired) is
// removed. Called once, by newRunManager.
func (m *runManager) loadConversations() {
	records, err := m.opts.Store.readConversations()
	if err != nil {
		m.logger.Error("reading the conversations on disk failed", "err", err)
	}
	for _, id := range m.order {
		r := m.runs[id]
		cid := r.final.ConversationID
		if cid == "" {
			continue
		}
		c := m.conversations[cid]
		if c == nil {
			rec, ok := records[cid]
			if !ok {
				rec = conversationRecord{ID: cid, Owner: r.req.Owner, CreatedAt: r.createdAt}
			}
			// The tenant is the first run's: an older harnessd's record
			// has the owner, which that run's tenant defaults to.
			c = &conversation{id: cid, owner: rec.Owner, tenant: r.req.Tenant, createdAt: rec.CreatedAt, history: &conversationHistory{}}
			m.conversations[cid] = c
		}
		r.conv = &runConversation{id: cid, history: c.history}
		c.runs = append(c.runs, r)
	}
	for id := range records {
		if m.conversations[id] == nil {
			m.opts.Store.remove(id)
		}
	}
}

// conversationPath returns where conversation id's record is kept.
func (s *runStore) conversationPath(id string) string {
	return filepath.Join(s.dir, id+conversationExt)
}

// readConversations returns the conversation records on disk by id. A
// record that does not decode (a crash while it was written, before any
// run of it was) is removed.
func (s *runStore) readConversations() (map[string]conversationRecord, error) {
	paths, err := filepath.Glob(filepath.Join(s.dir, "*"+conversationExt))
	if err != nil {
		return nil, err
	}
	out := map[string]conversationRecord{}
	for _, p := range paths {
		id := strings.TrimSuffix(filepath.Base(p), conversationExt)
		b, err := os.ReadFile(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		var rec conversationRecord
		if err == nil {
			err = json.Unmarshal(b, &rec)
		}
		if err != nil || rec.ID != id {
			s.logger.Warn("removing an unreadable conversation record", "conversation", id, "err", err)
			os.Remove(p)
			continue
		}
		out[id] = rec
	}
	return out, nil
}

// groupConversationsLocked returns kept with the runs of each conversation
// replaced by one entry under the conversation's id, at its last run's
// place: ended when all of them are, at the last end, with their bytes
// and count. So retention keeps or drops a conversation whole, by its
// last activity. Called under m.mu.
func (m *runManager) groupConversationsLocked(kept []keptRun) []keptRun {
	if len(m.conversations) == 0 {
		return kept // nothing to group: no map to build at every run's end
	}
	groups := map[string]*keptRun{}
	last := map[string]int{}
	for i, k := range kept {
		cid := m.runs[k.id].conversationID()
		if cid == "" || m.conversations[cid] == nil {
			continue
		}
		g := groups[cid]
		if g == nil {
			g = &keptRun{id: cid, ended: true}
			groups[cid] = g
		}
		g.ended = g.ended && k.ended
		if k.endedAt.After(g.endedAt) {
			g.endedAt = k.endedAt
		}
		g.bytes += k.bytes
		g.runs++
		last[cid] = i
	}
	out := make([]keptRun, 0, len(kept))
	for i, k := range kept {
		cid := m.runs[k.id].conversationID()
		if g := groups[cid]; g == nil {
			out = append(out, k)
		} else if last[cid] == i {
			out = append(out, *g)
		}
	}
	return out
}

// expandConversationsLocked returns ids with each conversation's id
// replaced by the ids of its runs followed by its own (its record is
// removed last), and forgets those conversations. Called under m.mu.
func (m *runManager) expandConversationsLocked(ids []string) []string {
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		if c := m.conversations[id]; c != nil {
			for _, r := range c.runs {
				out = append(out, r.id)
			}
			delete(m.conversations, id)
		}
		out = append(out, id)
	}
	return out
}

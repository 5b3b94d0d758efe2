package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"
)

// This file holds the pinned tool definitions, against a server that
// changes a tool after it was approved to steer the model ("rug pull"):
// the pin store under $HARNESS_HOME/pins (one JSON file per global
// server), the canonical digest of a definition and its comparison, and
// what find_tool and a call say of a tool held.

// errNotHeld is the error of an accept naming a tool that is not held.
var errNotHeld = errors.New("not held")

// A toolDefinition is the canonical form of a tool's definition: the
// fields in a fixed order, the schemas and annotations decoded into any,
// so that encoding/json writes their keys sorted and their order as the
// server sent it does not matter.
type toolDefinition struct {
	Name         string `json:"name"`
	Title        string `json:"title,omitempty"`
	Description  string `json:"description,omitempty"`
	InputSchema  any    `json:"inputSchema,omitempty"`
	OutputSchema any    `json:"outputSchema,omitempty"`
	Annotations  any    `json:"annotations,omitempty"`
}

// definitionOf returns the canonical definition of t. A schema that is not
// valid JSON is kept as its text, so it still counts in the digest.
func definitionOf(t toolInfo) toolDefinition {
	return toolDefinition{Name: t.Name, Title: t.Title, Description: t.Description,
		InputSchema: canonicalJSON(t.InputSchema), OutputSchema: canonicalJSON(t.OutputSchema), Annotations: canonicalJSON(t.Annotations)}
}

// canonicalJSON decodes raw into any (numbers kept as written), nil for
// none or null, its text when it is not JSON.
func canonicalJSON(raw json.RawMessage) any {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return string(raw)
	}
	return v
}

// digest returns the SHA-256, in hex, of the definition's canonical JSON.
func (d toolDefinition) digest() string {
	data, _ := json.Marshal(d) // values decoded from JSON always encode
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// changedFields names the fields of the definition that differ between
// old and new, in the definition's order.
func changedFields(old, new toolDefinition) []string {
	enc := func(v any) string { b, _ := json.Marshal(v); return string(b) }
	var out []string
	for _, f := range []struct {
		name     string
		old, new any
	}{
		{"title", old.Title, new.Title},
		{"description", old.Description, new.Description},
		{"inputSchema", old.InputSchema, new.InputSchema},
		{"outputSchema", old.OutputSchema, new.OutputSchema},
		{"annotations", old.Annotations, new.Annotations},
	} {
		if enc(f.old) != enc(f.new) {
			out = append(out, f.name)
		}
	}
	return out
}

// A pinFile is what $HARNESS_HOME/pins/<server>.json holds: each tool's
// pinned definition, by the server's own tool name.
type pinFile struct {
	Server string             `json:"server"`
	Tools  map[string]toolPin `json:"tools"`
}

// A toolPin is one tool's pinned definition and, while the tool is held,
// the differing definition last listed (Pending).
type toolPin struct {
	Digest     string         `json:"digest"`
	Definition toolDefinition `json:"definition"`
	PinnedAt   time.Time      `json:"pinned_at"`
	Pending    *pendingPin    `json:"pending,omitempty"`
}

// A pendingPin is a definition listed that differs from the pin, held
// until an admin accepts it.
type pendingPin struct {
	Digest     string         `json:"digest"`
	Definition toolDefinition `json:"definition"`
	SeenAt     time.Time      `json:"seen_at"`
}

// change describes the pending definition against the pin.
func (p toolPin) change(tool string) toolChange {
	return toolChange{Tool: tool, OldDigest: p.Digest, NewDigest: p.Pending.Digest,
		Changed:        changedFields(p.Definition, p.Pending.Definition),
		OldDescription: p.Definition.Description, NewDescription: p.Pending.Definition.Description, SeenAt: p.Pending.SeenAt}
}

// A pinStore keeps the pin files of the global servers in dir. It is a
// toolPinner; a change is logged, counted in metrics and recorded in the
// audit trail. Safe for concurrent use, and beside other processes on the
// same dir (a daemon, and harnessd mcp accept when it finds none
// listening at its address): each check or accept reads and replaces the
// whole file under an flock on dir (lockDir), which also keeps the
// goroutines of one process apart.
type pinStore struct {
	dir     string
	logger  *slog.Logger
	metrics *metrics
	audit   *auditLog
}

// newPinStore returns the store of the pin files in dir (created on the
// first write); logger, metrics and audit may be nil.
func newPinStore(dir string, logger *slog.Logger, m *metrics, audit *auditLog) *pinStore {
	return &pinStore{dir: dir, logger: orDiscard(logger), metrics: m, audit: audit}
}

// pinsDir returns the directory of the pin files under home.
func pinsDir(home string) string { return filepath.Join(home, "pins") }

// path returns the pin file of server.
func (p *pinStore) path(server string) string { return filepath.Join(p.dir, server+".json") }

// lockDir creates dir if needed and takes an exclusive flock on it, so
// that another check or accept, in this process or another, does not read
// the file this one is replacing, or replace it in between: each call
// opens dir anew, and flock keeps apart descriptors opened apart. The
// lock is held for one read and one write of a small file; unlock
// releases it. (Go's signal handlers restart flock: no EINTR.)
func (p *pinStore) lockDir() (unlock func(), err error) {
	if err := os.MkdirAll(p.dir, 0o700); err != nil {
		return nil, fmt.Errorf("pinned tool definitions: %v", err)
	}
	d, err := os.Open(p.dir)
	if err != nil {
		return nil, fmt.Errorf("pinned tool definitions: %v", err)
	}
	if err := syscall.Flock(int(d.Fd()), syscall.LOCK_EX); err != nil {
		d.Close()
		return nil, fmt.Errorf("lock pinned tool definitions %s: %v", p.dir, err)
	}
	return func() { d.Close() }, nil // closing the last descriptor releases the flock
}

// load reads the pin file of server; a missing file is no pins. Its
// errors, like save's, name the file, not the server: the registry names
// the server once in its status.
func (p *pinStore) load(server string) (pinFile, error) {
	pf := pinFile{Server: server, Tools: map[string]toolPin{}}
	data, err := os.ReadFile(p.path(server))
	if errors.Is(err, fs.ErrNotExist) {
		return pf, nil
	}
	if err != nil {
		return pf, fmt.Errorf("read pinned tool definitions: %v", err)
	}
	if err := json.Unmarshal(data, &pf); err != nil {
		return pf, fmt.Errorf("pinned tool definitions %s: %v; fix the file, or remove it to pin the definitions listed next", p.path(server), err)
	}
	if pf.Tools == nil {
		pf.Tools = map[string]toolPin{}
	}
	pf.Server = server
	return pf, nil
}

// save replaces the pin file of server durably.
func (p *pinStore) save(pf pinFile) error {
	data, err := json.MarshalIndent(pf, "", "  ")
	if err != nil {
		return fmt.Errorf("encode pinned tool definitions: %v", err)
	}
	if err := replaceFile(p.path(pf.Server), append(data, '\n')); err != nil {
		return fmt.Errorf("write pinned tool definitions %s: %v", p.path(pf.Server), err)
	}
	return nil
}

// check pins the definitions of tools not seen before and compares the
// others with their pins: a differing one is, under pinHold, held (its
// definition kept as pending) and returned in held; under pinWarn logged,
// counted, pinned and returned in warned, for the runs that reach the
// server to tell (mcp.tool.changed). A tool listed again as pinned stops
// being held. The file is written only when something changed.
func (p *pinStore) check(server, mode string, tools []toolInfo) (held, warned []toolChange, err error) {
	if mode == pinOff {
		return nil, nil, nil
	}
	unlock, err := p.lockDir()
	if err != nil {
		return nil, nil, err
	}
	defer unlock()
	pf, err := p.load(server)
	if err != nil {
		return nil, nil, err
	}
	now := time.Now().UTC()
	dirty := false
	for _, t := range tools {
		if t.Name == "" {
			continue
		}
		def := definitionOf(t)
		digest := def.digest()
		pin, known := pf.Tools[t.Name]
		switch {
		case !known:
			pf.Tools[t.Name] = toolPin{Digest: digest, Definition: def, PinnedAt: now}
			dirty = true
		case pin.Digest == digest:
			if pin.Pending != nil {
				pin.Pending = nil
				pf.Tools[t.Name] = pin
				dirty = true
			}
		case mode == pinHold:
			if pin.Pending == nil || pin.Pending.Digest != digest {
				pin.Pending = &pendingPin{Digest: digest, Definition: def, SeenAt: now}
				pf.Tools[t.Name] = pin
				dirty = true
				ch := pin.change(t.Name)
				p.logger.Warn("tool definition changed; the tool is held until an admin accepts it (harnessd mcp accept)",
					"server", server, "tool", t.Name, "changed", strings.Join(ch.Changed, ","), "old_digest", ch.OldDigest, "new_digest", ch.NewDigest)
				p.changed(server, mode, ch)
			}
			held = append(held, pin.change(t.Name))
		default: // pinWarn
			pin.Pending = &pendingPin{Digest: digest, Definition: def, SeenAt: now}
			ch := pin.change(t.Name)
			p.logger.Warn("tool definition changed; going on with the new one (pin_tools = \"warn\")",
				"server", server, "tool", t.Name, "changed", strings.Join(ch.Changed, ","), "old_digest", ch.OldDigest, "new_digest", ch.NewDigest)
			p.changed(server, mode, ch)
			warned = append(warned, ch)
			pf.Tools[t.Name] = toolPin{Digest: digest, Definition: def, PinnedAt: now}
			dirty = true
		}
	}
	if dirty {
		if err := p.save(pf); err != nil {
			return nil, nil, err
		}
	}
	return held, warned, nil
}

// changed counts a change of server's tool found under mode (pinHold,
// pinWarn) and records it in the audit trail.
func (p *pinStore) changed(server, mode string, ch toolChange) {
	p.metrics.toolDefinitionChange(server, mode)
	outcome := "warned"
	if mode == pinHold {
		outcome = "held"
	}
	p.audit.record(auditRecord{Type: auditToolChanged, Server: server, Tool: ch.Tool, Outcome: outcome,
		Changed: ch.Changed, OldDigest: ch.OldDigest, NewDigest: ch.NewDigest})
}

// accept pins the pending definitions of server's tools (only tool's,
// when tool is not "") and returns what it accepted, by tool name. A tool
// named that is not held is an error.
func (p *pinStore) accept(server, tool string) ([]toolChange, error) {
	unlock, err := p.lockDir()
	if err != nil {
		return nil, fmt.Errorf("server %q: %w", server, err)
	}
	defer unlock()
	pf, err := p.load(server)
	if err != nil {
		return nil, fmt.Errorf("server %q: %w", server, err)
	}
	if tool != "" {
		if pin, ok := pf.Tools[tool]; !ok || pin.Pending == nil {
			return nil, fmt.Errorf("server %q: tool %q is %w: nothing to accept (see the held tools in GET /v1/mcp/servers/%s)", server, tool, errNotHeld, server)
		}
	}
	var accepted []toolChange
	now := time.Now().UTC()
	for name, pin := range pf.Tools {
		if pin.Pending == nil || (tool != "" && name != tool) {
			continue
		}
		accepted = append(accepted, pin.change(name))
		pf.Tools[name] = toolPin{Digest: pin.Pending.Digest, Definition: pin.Pending.Definition, PinnedAt: now}
	}
	sort.Slice(accepted, func(i, j int) bool { return accepted[i].Tool < accepted[j].Tool })
	if len(accepted) == 0 {
		return nil, nil
	}
	if err := p.save(pf); err != nil {
		return nil, fmt.Errorf("server %q: %w", server, err)
	}
	p.logger.Info("held tool definitions accepted", "server", server, "tools", len(accepted))
	return accepted, nil
}

// describeChange returns, for a person, what accepting ch changes: the
// fields, and the descriptions before and after when they differ.
func describeChange(server string, ch toolChange) string {
	var b strings.Builder
	fmt.Fprintf(&b, "server %q tool %q: %s changed (pinned %.12s, listed %.12s)", server, ch.Tool, strings.Join(ch.Changed, ", "), ch.OldDigest, ch.NewDigest)
	if slices.Contains(ch.Changed, "description") {
		fmt.Fprintf(&b, "\n  old description: %q\n  new description: %q", ch.OldDescription, ch.NewDescription)
	}
	return b.String()
}

// setHeld records, in a snapshot not yet published, the tools of its
// server held out of it, by the name the agent would see.
func (st *serverTools) setHeld(held []toolChange) { st.held = st.byAgentName(held) }

// setWarned records, in a snapshot not yet published, the tools of its
// server whose changed definition it took in (pin_tools = "warn").
func (st *serverTools) setWarned(warned []toolChange) { st.warned = st.byAgentName(warned) }

// byAgentName returns changes by the name the agent sees of each tool,
// nil for none.
func (st *serverTools) byAgentName(changes []toolChange) map[string]toolChange {
	if len(changes) == 0 {
		return nil
	}
	out := make(map[string]toolChange, len(changes))
	for _, ch := range changes {
		out[mcpToolName(st.server, ch.Tool)] = ch
	}
	return out
}

// changesWithin returns the changes of server's tools (by agent name)
// that l leaves, nil for none.
func changesWithin(server string, changes map[string]toolChange, l toolLimits) map[string]toolChange {
	var out map[string]toolChange
	for name, ch := range changes {
		if l.allowsTool(server, name) {
			if out == nil {
				out = map[string]toolChange{}
			}
			out[name] = ch
		}
	}
	return out
}

// heldReason says, for the model, why the tool name is held, and false
// when no reachable server holds a tool of that name.
func heldReason(sets []*serverTools, name string) (string, bool) {
	for _, st := range sets {
		if h, ok := st.held[name]; ok {
			return fmt.Sprintf("tool %s of server %q is held: its definition (%s) changed since it was approved, and it is not offered until an admin accepts the change",
				name, st.server, strings.Join(h.Changed, ", ")), true
		}
	}
	return "", false
}

// heldNote returns the line that tells the model which tools of the
// reachable servers are held, "" when none is.
func heldNote(sets []*serverTools) string {
	var names []string
	for _, st := range sets {
		for name := range st.held {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return ""
	}
	slices.Sort(names)
	return "Held, not offered until an admin accepts their changed definitions: " + strings.Join(names, ", ")
}

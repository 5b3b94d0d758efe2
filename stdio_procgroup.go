package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// This file holds the records of the stdio servers' process groups, one
// file per group under $HARNESS_HOME/servers/ (removed once the group is
// stopped), and the stopping, at start-up, of the groups a previous
// instance left running when it died without stopping them.
//
// A server's own process also dies with harnessd where the OS allows it
// (stdio_procgroup_linux.go); its children do not, and are found here on the
// next start. A record is written right after the fork: a crash in
// between leaves the group unrecorded (its leader still dies with
// harnessd on Linux). Records are not fsynced: they matter only while the
// machine stays up, and a crash of harnessd alone loses nothing written.

// A groupRecord says which process group a stdio server ran in, and how
// to tell that group from a later one that reuses its id.
type groupRecord struct {
	PGID    int    `json:"pgid"`
	Server  string `json:"server"`
	Command string `json:"command"`
	procIdentity
	// Owner is the harnessd that started the group: while it lives, the
	// group is its own business.
	Owner      int    `json:"owner"`
	OwnerStart uint64 `json:"owner_start_time"`
}

// A procIdentity tells a process from any later one with the same pid: its
// start time (in clock ticks since boot) and boot, its group and session.
type procIdentity struct {
	StartTime uint64 `json:"start_time"`
	BootID    string `json:"boot_id"`
	PGID      int    `json:"-"`
	Session   int    `json:"session"`
}

// errNoProcessIdentity is processIdentity's error where the OS does not
// say when a process started: groups are then not recorded.
var errNoProcessIdentity = errors.New("process start times are not available on this system")

// A procGroups records the process groups of the stdio servers started by
// this instance. A nil *procGroups records nothing. Safe for concurrent
// use (every group has its own file).
type procGroups struct {
	dir    string
	logger *slog.Logger
	self   procIdentity // of this process
}

// openProcGroups creates (0700) or opens the records directory dir.
func openProcGroups(dir string, logger *slog.Logger) (*procGroups, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("server process records %s: %w; check that $HARNESS_HOME is writable", dir, err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return nil, fmt.Errorf("server process records %s: %w", dir, err)
	}
	self, _ := processIdentity(os.Getpid())
	return &procGroups{dir: dir, logger: logger, self: self}, nil
}

func (g *procGroups) path(pgid int) string {
	return filepath.Join(g.dir, strconv.Itoa(pgid)+".json")
}

// add records the group of the server process pid (its group leader).
// A group that cannot be recorded is logged: the server runs regardless.
func (g *procGroups) add(server string, pid int, command string) {
	if g == nil {
		return
	}
	id, err := processIdentity(pid)
	if errors.Is(err, errNoProcessIdentity) {
		return
	}
	if err != nil {
		// The process already exited: its group is stopped by the waiter.
		g.logger.Debug("server process gone before its group was recorded", "server", server, "pid", pid, "err", err)
		return
	}
	b, _ := json.Marshal(groupRecord{PGID: pid, Server: server, Command: command, procIdentity: id,
		Owner: os.Getpid(), OwnerStart: g.self.StartTime})
	tmp := g.path(pid) + ".tmp"
	err = os.WriteFile(tmp, b, 0o600)
	if err == nil {
		err = os.Rename(tmp, g.path(pid))
	}
	if err != nil {
		os.Remove(tmp)
		g.logger.Warn("recording a server's process group failed; if harnessd crashes, its processes may outlive it",
			"server", server, "pgid", pid, "err", err)
	}
}

// remove forgets the group pgid, once it has been stopped.
func (g *procGroups) remove(pgid int) {
	if g == nil {
		return
	}
	if err := os.Remove(g.path(pgid)); err != nil && !os.IsNotExist(err) {
		g.logger.Warn("removing a server's process group record failed", "pgid", pgid, "err", err)
	}
}

// stopLeftovers SIGKILLs every process of the groups recorded by a
// harnessd that is no longer running, as long as the process is still
// theirs (same boot and session, started no earlier than the group's
// leader; the leader itself, if alive, with its recorded start time), and
// removes those records. The groups of a live harnessd (another instance
// on the same home) are left alone. Call it at start-up, before any server
// starts. It returns how many processes it signalled.
func (g *procGroups) stopLeftovers() int {
	entries, err := os.ReadDir(g.dir)
	if err != nil {
		g.logger.Warn("reading server process records failed", "dir", g.dir, "err", err)
		return 0
	}
	killed := 0
	for _, e := range entries {
		name := e.Name()
		path := filepath.Join(g.dir, name)
		if !strings.HasSuffix(name, ".json") {
			os.Remove(path) // a temporary file of an interrupted write
			continue
		}
		var rec groupRecord
		b, err := os.ReadFile(path)
		if err == nil {
			err = json.Unmarshal(b, &rec)
		}
		if err != nil || rec.PGID <= 1 {
			g.logger.Warn("ignoring unreadable server process record", "file", path, "err", err)
			os.Remove(path)
			continue
		}
		if ownerAlive(rec) {
			continue
		}
		n := stopGroup(rec)
		if n > 0 {
			g.logger.Warn("stopped server processes left by a previous harnessd", "server", rec.Server, "pgid", rec.PGID, "processes", n)
		}
		killed += n
		os.Remove(path)
	}
	return killed
}

// ownerAlive reports whether the harnessd that recorded rec still runs.
func ownerAlive(rec groupRecord) bool {
	if rec.Owner == os.Getpid() {
		return true
	}
	id, err := processIdentity(rec.Owner)
	return err == nil && id.StartTime == rec.OwnerStart && id.BootID == rec.BootID
}

// stopGroup SIGKILLs the processes of rec's group that are still ours and
// returns how many it signalled.
func stopGroup(rec groupRecord) int {
	if rec.BootID != currentBootID() {
		return 0 // the machine restarted since: every process of then is gone
	}
	members := groupMembers(rec.PGID)
	ours := func(pid int, id procIdentity) bool {
		if id.PGID != rec.PGID || id.Session != rec.Session || id.BootID != rec.BootID {
			return false
		}
		if pid == rec.PGID {
			return id.StartTime == rec.StartTime
		}
		return id.StartTime >= rec.StartTime
	}
	// A live leader that is not ours means the id names another group now.
	if id, err := processIdentity(rec.PGID); err == nil && !ours(rec.PGID, id) {
		return 0
	}
	killed := 0
	for _, pid := range members {
		// The handle pins the process (a pidfd where the OS has one), so
		// the one checked is the one signalled, even if pid is reused.
		p, err := os.FindProcess(pid)
		if err != nil {
			continue
		}
		if id, err := processIdentity(pid); err == nil && ours(pid, id) && p.Signal(syscall.SIGKILL) == nil {
			killed++
		}
		p.Release()
	}
	return killed
}

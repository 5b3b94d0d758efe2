package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// This file holds the stdio transport: the server subprocess in its own
// process group, newline-delimited framing with a size limit, the stderr
// tail and the stop ladder.

// Stop ladder timings: after stdin closes the server gets stopGrace to exit,
// then SIGTERM and stopGrace again, then SIGKILL.
const stopGrace = 2 * time.Second

// stderrTailBytes is how much of a server's stderr is kept for errors.
const stderrTailBytes = 64 << 10

// stderrLogBytes is how much of each stderr line the debug log shows.
const stderrLogBytes = 500

// A stdioTransport runs an MCP server as a subprocess and speaks
// newline-delimited JSON-RPC over its stdin and stdout. It is safe for
// concurrent use.
type stdioTransport struct {
	name       string
	logger     *slog.Logger
	cmd        *exec.Cmd
	maxMessage int
	secrets    *redactor // the server's env values, redacted from its stderr
	groups     *procGroups
	grace      time.Duration // each step of the stop ladder (stopGrace unless shortened)

	stdout *os.File
	stderr *os.File

	writeMu sync.Mutex
	// guards writes to stdin, so messages never interleave, and line;
	// close does not take it: closing stdin unblocks a write stuck on a
	// full pipe.
	stdin *os.File
	line  []byte // the message being written, with its newline

	// onMessage and onEnd are listen's deliver and ended, called by the
	// reader goroutine (stdio_read.go).
	onMessage func([]byte)
	onEnd     func()

	quit      chan struct{} // closed by close: whoever reads stdout stops delivering
	exited    chan struct{} // closed by the waiter once the process is reaped
	stderrEOF chan struct{} // closed by the stderr reader when it ends
	readers   sync.WaitGroup
	tail      *tailBuffer
	exitErr   error // set by the waiter before exited is closed
	closeErr  error
	closing   atomic.Bool // set by close before quit is closed
	endCause  error       // why the server went away; set under endOnce
	endOnce   sync.Once

	closeOnce sync.Once
}

// startStdio starts cfg.Command (no shell) with env in its own process
// group, recorded in groups (which may be nil) until the group is stopped.
// The process outlives no one: close stops it and its group, and where the
// OS allows it the process dies with harnessd (serverProcAttr). grace is
// each step of the stop ladder; zero means stopGrace.
func startStdio(cfg serverConfig, env []string, groups *procGroups, grace time.Duration, logger *slog.Logger) (*stdioTransport, error) {
	if cfg.Command == "" {
		return nil, errors.New("start: command is empty")
	}
	// exec blames a missing working directory on the command, and says
	// nothing of what to do: the same check as harnessd check's first.
	if problems := cfg.launchProblems(os.Getenv("PATH")); len(problems) > 0 {
		return nil, fmt.Errorf("start: %s", problems[0])
	}
	cmd := exec.Command(cfg.Command, cfg.Args...)
	cmd.Env = env
	cmd.Dir = cfg.Cwd
	cmd.SysProcAttr = serverProcAttr()

	var files []*os.File
	closeAll := func() {
		for _, f := range files {
			f.Close()
		}
	}
	pipe := func() (r, w *os.File, err error) {
		r, w, err = os.Pipe()
		if err == nil {
			files = append(files, r, w)
		}
		return r, w, err
	}
	stdinR, stdinW, err := pipe()
	if err != nil {
		return nil, fmt.Errorf("start: %w", err)
	}
	stdoutR, stdoutW, err := pipe()
	if err != nil {
		closeAll()
		return nil, fmt.Errorf("start: %w", err)
	}
	stderrR, stderrW, err := pipe()
	if err != nil {
		closeAll()
		return nil, fmt.Errorf("start: %w", err)
	}
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdinR, stdoutW, stderrW
	if err := startServerProcess(cmd); err != nil {
		closeAll()
		return nil, fmt.Errorf("start %q: %w (check the server's command and PATH)", cfg.Command, err)
	}
	// The child holds its ends now; ours must close so EOF can arrive.
	stdinR.Close()
	stdoutW.Close()
	stderrW.Close()
	groups.add(cfg.Name, cmd.Process.Pid, cfg.Command)

	t := &stdioTransport{
		name:       cfg.Name,
		logger:     logger,
		cmd:        cmd,
		maxMessage: cfg.messageLimit(),
		secrets:    newRedactor(cfg.secretValues()...),
		groups:     groups,
		grace:      cmp.Or(grace, stopGrace),
		stdin:      stdinW,
		stdout:     stdoutR,
		stderr:     stderrR,
		quit:       make(chan struct{}),
		exited:     make(chan struct{}),
		stderrEOF:  make(chan struct{}),
		tail:       newTailBuffer(stderrTailBytes),
	}
	t.readers.Add(1)
	// Owned by the transport; exits at stderr EOF (the process and its
	// group are gone, or close closed the pipe).
	go t.readStderr()
	// Owned by the transport; exits when the process has been reaped.
	go t.wait()
	return t, nil
}

// wait reaps the process. An unexpected exit also kills what is left of
// its process group, so no grandchild keeps the pipes (and itself) alive.
func (t *stdioTransport) wait() {
	t.cmd.Wait() // the outcome is read from ProcessState below
	t.exitErr = describeExit(t.cmd.ProcessState)
	close(t.exited)
	t.killGroup(syscall.SIGKILL)
	t.groups.remove(t.cmd.Process.Pid)
}

// describeExit says how a process ended: its exit status or its signal.
func describeExit(ps *os.ProcessState) error {
	if ps == nil {
		return errors.New("exited")
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return fmt.Errorf("killed by signal %s", ws.Signal())
	}
	return fmt.Errorf("exited with status %d", ps.ExitCode())
}

// killGroup signals the server's whole process group.
func (t *stdioTransport) killGroup(sig syscall.Signal) {
	if t.cmd.Process == nil {
		return
	}
	if err := syscall.Kill(-t.cmd.Process.Pid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		t.logger.Debug("signal process group failed", "signal", sig.String(), "err", err)
	}
}

// send writes msg and a newline to the server's stdin. A write the server
// does not take before ctx is done breaks the framing, so it ends the
// transport.
func (t *stdioTransport) send(ctx context.Context, msg []byte) error {
	select {
	case <-t.quit:
		return errTransportClosed
	case <-t.exited:
		return errTransportClosed
	default:
	}
	t.writeMu.Lock()
	defer t.writeMu.Unlock()
	t.line = append(append(t.line[:0], msg...), '\n')
	defer func() {
		if cap(t.line) > 64<<10 {
			t.line = nil // a large message's buffer is not kept
		}
	}()
	// A server that has fallen behind reading (or is gone, which the
	// write reports) is waited for as long as ctx allows.
	expired := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		t.stdin.SetWriteDeadline(time.Unix(1, 0))
		close(expired)
	})
	n, err := t.stdin.Write(t.line)
	if !stop() {
		// The deadline must be cleared after it was set, not before:
		// otherwise it stays in the past and fails every later write.
		<-expired
		if n > 0 && n < len(t.line) {
			t.logger.Warn("server stopped reading stdin mid-message; stopping it")
			// Owned by send; close is bounded.
			go t.close()
		}
		t.stdin.SetWriteDeadline(time.Time{})
		if err != nil {
			return fmt.Errorf("write to server stdin: %w", ctx.Err())
		}
	}
	if err != nil {
		if errors.Is(err, os.ErrClosed) || errors.Is(err, syscall.EPIPE) {
			return errTransportClosed
		}
		return fmt.Errorf("write to server stdin: %w", err)
	}
	return nil
}

// readStderr drains stderr into the tail buffer and the debug log.
func (t *stdioTransport) readStderr() {
	defer t.readers.Done()
	defer close(t.stderrEOF)
	r := bufio.NewReaderSize(t.stderr, 4096)
	debug := t.logger.Enabled(context.Background(), slog.LevelDebug)
	// A line longer than the reader's buffer comes in chunks; the logged
	// line is its start, kept long enough that a secret crossing the cut
	// is still whole when it is redacted.
	keep := stderrLogBytes + t.secrets.longest()
	var long []byte
	for {
		chunk, err := r.ReadSlice('\n')
		if len(chunk) > 0 {
			t.tail.Write(chunk)
		}
		if debug {
			if room := keep - len(long); room > 0 {
				long = append(long, chunk[:min(room, len(chunk))]...)
			}
			if err == nil || (!errors.Is(err, bufio.ErrBufferFull) && len(long) > 0) {
				t.logger.Debug("server stderr", "line", t.secrets.cut(string(bytes.TrimRight(long, "\r\n")), stderrLogBytes))
				long = long[:0]
			}
		}
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			return
		}
	}
}

// recordEnd records why the transport ended: the exit status and stderr
// tail. It waits briefly for the process to be reaped so the status is
// known.
func (t *stdioTransport) recordEnd() {
	t.endOnce.Do(func() {
		select {
		case <-t.exited:
		case <-t.quit:
		case <-time.After(t.grace):
		}
		select {
		case <-t.exited:
			// The last words on stderr explain the exit: let them arrive.
			select {
			case <-t.stderrEOF:
			case <-t.quit:
			case <-time.After(t.grace):
			}
			t.endCause = fmt.Errorf("server process %s", t.exitErr)
		default:
			t.endCause = errors.New("server closed its stdout")
		}
		if tail := t.stderrTail(statusStderrTail); tail != "" {
			t.endCause = fmt.Errorf("%w; stderr: %s", t.endCause, tail)
		}
	})
}

// stderrTail returns up to n bytes of the end of the server's stderr.
func (t *stdioTransport) stderrTail(n int) string {
	b := t.tail.Bytes()
	return strings.TrimSpace(t.secrets.tail(string(b), n))
}

// endErr returns why the server went away (exit status and stderr tail),
// or nil while it runs or after close stopped it on purpose.
func (t *stdioTransport) endErr() error {
	if t.closing.Load() {
		return nil
	}
	return t.endCause
}

// close stops the server: close stdin, wait stopGrace, SIGTERM the group,
// wait stopGrace, SIGKILL the group, wait stopGrace. It returns once the
// process is reaped and the readers are done, within 3×stopGrace: it never
// waits for a write, since closing stdin makes a stuck one fail at once.
// It is idempotent.
func (t *stdioTransport) close() error {
	t.closeOnce.Do(func() {
		t.closing.Store(true)
		close(t.quit)
		t.stdin.Close()
		if !t.waitExit(t.grace) {
			t.killGroup(syscall.SIGTERM)
			if !t.waitExit(t.grace) {
				t.killGroup(syscall.SIGKILL)
				if !t.waitExit(t.grace) {
					t.closeErr = fmt.Errorf("server %q: process %d did not exit after SIGKILL", t.name, t.cmd.Process.Pid)
				}
			}
		}
		t.killGroup(syscall.SIGKILL)
		// A grandchild in another group may still hold the pipes: ours are
		// closed so the readers end regardless.
		t.stdout.Close()
		t.stderr.Close()
		t.readers.Wait()
	})
	return t.closeErr
}

// waitExit waits up to d for the process to be reaped.
func (t *stdioTransport) waitExit(d time.Duration) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-t.exited:
		return true
	case <-timer.C:
		return false
	}
}

// A tailBuffer keeps the last n bytes written to it. It is safe for
// concurrent use.
type tailBuffer struct {
	mu sync.Mutex
	// guards buf
	buf []byte
	max int
}

// newTailBuffer returns a buffer keeping the last n bytes written.
func newTailBuffer(n int) *tailBuffer { return &tailBuffer{max: n} }

// Write keeps the end of p; it never fails.
func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = keepTail(b.buf, p, b.max)
	return len(p), nil
}

// Bytes returns a copy of the kept bytes.
func (b *tailBuffer) Bytes() []byte {
	b.mu.Lock()
	defer b.mu.Unlock()
	return bytes.Clone(b.buf)
}

var _ io.Writer = (*tailBuffer)(nil)

// statusStderrTail is how much of a failed stdio server's stderr its
// status shows.
const statusStderrTail = 2 << 10

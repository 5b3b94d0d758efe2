//go:build linux

package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"
	"syscall"
	"testing"
	"unsafe"
)

// This file tests that mcp call shows its call's progress notifications
// on a terminal (a pseudo-terminal here) and nowhere else.

// openPTY returns the two ends of a new pseudo-terminal, closed at
// cleanup.
func openPTY(t *testing.T) (master, slave *os.File) {
	t.Helper()
	master, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals: %v", err)
	}
	t.Cleanup(func() { master.Close() })
	var unlock int32
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, master.Fd(), syscall.TIOCSPTLCK, uintptr(unsafe.Pointer(&unlock))); e != 0 {
		t.Fatalf("unlock pty: %v", e)
	}
	var n uint32
	if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, master.Fd(), syscall.TIOCGPTN, uintptr(unsafe.Pointer(&n))); e != 0 {
		t.Fatalf("pty number: %v", e)
	}
	slave, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { slave.Close() })
	return master, slave
}

func TestMCPCallProgressOnTerminal(t *testing.T) {
	t.Parallel()
	everything := everythingStdioCommand(t)
	env := map[string]string{"HARNESS_MCP_SERVERS": serversJSON(t, map[string]any{"name": "everything", "command": everything.Command, "args": everything.Args})}
	args := []string{"mcp", "call", "mcp_everything_trigger_long_running_operation", `{"duration":0.3,"steps":3}`}
	want := "everything: progress 1/3\neverything: progress 2/3\neverything: progress 3/3\n"
	tests := []struct {
		name     string
		terminal bool
	}{
		{"terminal", true},
		{"not a terminal", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var stderr io.Writer
			var errOut lockedBuffer
			read := make(chan string, 1)
			if tt.terminal {
				master, slave := openPTY(t)
				stderr = slave
				go func() {
					b, _ := io.ReadAll(master) // ends with EIO once the slave is closed
					read <- strings.ReplaceAll(string(b), "\r\n", "\n")
				}()
			} else {
				stderr = &errOut
			}
			var out lockedBuffer
			full := map[string]string{"PATH": os.Getenv("PATH"), "HOME": t.TempDir(), "HARNESS_HOME": t.TempDir(), "HARNESS_WORKSPACE": t.TempDir()}
			for k, v := range env {
				full[k] = v
			}
			a := &app{stdin: bytes.NewReader(nil), stdout: &out, stderr: stderr, getenv: fakeEnv(full)}
			code := exitCode(a.run(t.Context(), args), stderr)
			got := errOut.String()
			if tt.terminal {
				stderr.(*os.File).Close()
				got = <-read
			}
			if code != 0 || !strings.Contains(out.String(), "Long running operation completed") {
				t.Fatalf("harnessd %q = %d, stdout %q, stderr %q", args, code, out.String(), got)
			}
			if shown := strings.Contains(got, want); shown != tt.terminal || (!tt.terminal && strings.Contains(got, "progress")) {
				t.Errorf("harnessd %q with stderr a terminal = %v: stderr %q; want progress lines %q only on a terminal", args, tt.terminal, got, want)
			}
		})
	}
}

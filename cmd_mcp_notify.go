package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
)

// This file holds how mcp add, remove and import tell a running daemon
// about the file they changed: POST /v1/config/reload at HARNESS_ADDR
// with the token of HARNESS_TOKEN, as harnessd run reaches it. The edit
// stands whatever the daemon answers.

// tellTimeout bounds the whole exchange with the daemon: an edit never
// waits long on a daemon that does not answer.
const tellTimeout = 10 * time.Second

// tellDaemon asks the daemon at HARNESS_ADDR (default 127.0.0.1:8080) to
// reload its configuration after file was changed, and prints on stdout
// whether the change was applied or, plainly, what to run to apply it.
// It never fails: the file is written already.
func (a *app) tellDaemon(ctx context.Context, file string) {
	addr := defaultAddr(a.getenv)
	token, _ := a.getenv("HARNESS_TOKEN")
	ctx, cancel := context.WithTimeout(ctx, tellTimeout)
	defer cancel()
	c := &runClient{base: daemonURL(addr), token: strings.TrimSpace(token), client: &http.Client{}}
	status, data, err := c.do(ctx, http.MethodPost, "/v1/config/reload", nil)
	notTold := func(why string) {
		fmt.Fprintf(a.stdout, "the daemon at %s was not told (%s): run \"systemctl reload harnessd\" (under systemd) or \"kill -HUP <pid>\" (the pid of harnessd serve) to apply the change\n", addr, why)
	}
	answer, _ := decodeAnswerError(data)
	switch {
	case err != nil:
		notTold("nothing answers there; set HARNESS_ADDR to the daemon's address if it runs elsewhere")
	case status == http.StatusUnauthorized:
		notTold("it needs an admin key: set HARNESS_TOKEN to the token of one")
	case status == http.StatusForbidden:
		notTold("the key in HARNESS_TOKEN is not an admin key")
	case status == http.StatusBadRequest && answer.Code == "invalid_config":
		fmt.Fprintf(a.stdout, "the daemon at %s refused the new configuration and keeps running the old one; fix the problem and run \"systemctl reload harnessd\" or \"kill -HUP <pid>\":\n%s\n", addr, answer.Message)
	case status != http.StatusOK:
		notTold(fmt.Sprintf("it answered %d %s", status, strings.TrimSpace(answer.Message)))
	default:
		var out struct {
			ConfigFiles []string `json:"config_files"`
		}
		json.Unmarshal(data, &out)
		if !slices.Contains(out.ConfigFiles, file) {
			fmt.Fprintf(a.stdout, "the daemon at %s reloaded, but it does not read %s (it reads %s): check HARNESS_HOME, --scope and --workspace\n", addr, file, strings.Join(out.ConfigFiles, ", "))
			return
		}
		fmt.Fprintf(a.stdout, "applied: the daemon at %s reloaded its configuration\n", addr)
	}
}

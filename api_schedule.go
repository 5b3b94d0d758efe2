package main

import (
	"fmt"
	"net/http"
)

// This file holds the API of schedules: GET /v1/schedules and
// POST /v1/schedules/{name}/run, both for admin keys.

// listSchedules answers GET /v1/schedules: every schedule with its next
// fire time and the run it started last.
func (a *api) listSchedules(w http.ResponseWriter, r *http.Request, _ authInfo) {
	list := []scheduleView{}
	if a.schedules != nil {
		list = a.schedules.list()
	}
	writeBody(w, http.StatusOK, a.globalSecrets.load().marshal(map[string]any{"schedules": list}, true))
}

// runSchedule answers POST /v1/schedules/{name}/run: 202 with the run it
// started at once (whatever the schedule's overlap), 404 for an unknown
// schedule, and start's errors as POST /v1/runs answers them.
func (a *api) runSchedule(w http.ResponseWriter, r *http.Request, info authInfo) {
	name := r.PathValue("name")
	var run *run
	found, err := false, error(nil)
	if a.schedules != nil {
		run, found, err = a.schedules.runNow(name)
	}
	switch {
	case !found:
		writeError(w, http.StatusNotFound, "not_found", fmt.Sprintf("schedule %q: not found (schedules are listed at GET /v1/schedules)", name))
	case err != nil:
		a.writeStartError(w, err)
	default:
		a.logger.Info("scheduled run started on request", "schedule", name, "run", run.id, "key", info.key)
		w.Header().Set("Location", "/v1/runs/"+run.id)
		writeJSON(w, http.StatusAccepted, map[string]string{"run_id": run.id, "status": run.view().Status, "schedule": name})
	}
}

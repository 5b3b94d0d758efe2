package main

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
)

// This file holds the API of schedules, all for admin keys: GET
// /v1/schedules and POST /v1/schedules/{name}/run, and the edits (create,
// change, pause, resume, delete), written to the config file that
// defines the schedule and applied without a restart (configManager).

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

// decodeScheduleBody decodes a schedule (the fields of a [[schedules]]
// table) and checks it as a config file's would be. name is the path's
// ("" for POST, where the body names it). It answers 400 naming each bad
// field and returns false for a bad schedule.
func decodeScheduleBody(w http.ResponseWriter, r *http.Request, name string) (rawSchedule, bool) {
	var raw rawSchedule
	err := decodeBody(w, r, &raw)
	switch {
	case err != nil:
	case name != "" && raw.Name != "" && raw.Name != name:
		err = fmt.Errorf("request body: name: %q differs from the path's %q; leave it out or make them agree", raw.Name, name)
	default:
		if name != "" {
			raw.Name = name
		}
		if _, problems := checkSchedule(raw); len(problems) > 0 {
			err = fmt.Errorf("request body: schedule %q: %s", raw.Name, strings.Join(problems, "; "))
		}
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request", err.Error())
		return raw, false
	}
	return raw, true
}

// scheduleView returns the schedule name as GET /v1/schedules shows it,
// or false.
func (a *api) scheduleView(name string) (scheduleView, bool) {
	if a.schedules == nil {
		return scheduleView{}, false
	}
	list := a.schedules.list()
	i := slices.IndexFunc(list, func(v scheduleView) bool { return v.Name == name })
	if i < 0 {
		return scheduleView{}, false
	}
	return list[i], true
}

// editedSchedule returns, for a route that edits the schedule named in
// r's path, the manager, the name and the file that holds the schedule;
// it answers the refusal and returns file "" when there is none of them.
func (a *api) editedSchedule(w http.ResponseWriter, r *http.Request) (configManager, string, string) {
	m := a.managed(w)
	if m == nil {
		return nil, "", ""
	}
	name := r.PathValue("name")
	return m, name, a.fileOfSchedule(w, name)
}

// fileOfSchedule returns the config file that defines schedule name, or
// answers 404 and returns "".
func (a *api) fileOfSchedule(w http.ResponseWriter, name string) string {
	v, ok := a.scheduleView(name)
	if !ok {
		writeError(w, http.StatusNotFound, "not_found", fmt.Sprintf("schedule %q: not found (schedules are listed at GET /v1/schedules; create one with POST /v1/schedules)", name))
		return ""
	}
	return v.Source
}

// scheduleTaken and scheduleGone are the refusals of an edit that found
// the file other than the running schedules said.
func scheduleTaken(file, name string) error {
	return refuse(refusedTaken, "%s already defines schedule %q", file, name)
}

// scheduleGone: see scheduleTaken.
func scheduleGone(file, name string) error {
	return refuse(refusedUnknown, "%s defines no schedule %q (it changed since harnessd read it: reload)", file, name)
}

// createSchedule answers POST /v1/schedules: 201 with the schedule as GET
// /v1/schedules shows it once written (?scope= as for servers) and
// applied; 409 for a name already used.
func (a *api) createSchedule(w http.ResponseWriter, r *http.Request, info authInfo) {
	m := a.managed(w)
	if m == nil {
		return
	}
	raw, ok := decodeScheduleBody(w, r, "")
	if !ok {
		return
	}
	if v, exists := a.scheduleView(raw.Name); exists {
		writeError(w, http.StatusConflict, "conflict", fmt.Sprintf("schedule %q already exists (in %s): change it with PUT /v1/schedules/%s, or choose another name", raw.Name, v.Source, raw.Name))
		return
	}
	file := editTarget(w, r, m)
	if file == "" {
		return
	}
	a.editSchedule(w, info, m, file, raw.Name, "created", http.StatusCreated, func(cur *rawSchedule) (*rawSchedule, error) {
		if cur != nil {
			return nil, scheduleTaken(file, raw.Name)
		}
		return &raw, nil
	})
}

// replaceSchedule answers PUT /v1/schedules/{name}: the body is the whole
// new schedule (paused true pauses it); 200 once written and applied.
func (a *api) replaceSchedule(w http.ResponseWriter, r *http.Request, info authInfo) {
	m, name, file := a.editedSchedule(w, r)
	if file == "" {
		return
	}
	raw, ok := decodeScheduleBody(w, r, name)
	if !ok {
		return
	}
	a.editSchedule(w, info, m, file, name, "changed", http.StatusOK, func(cur *rawSchedule) (*rawSchedule, error) {
		if cur == nil {
			return nil, scheduleGone(file, name)
		}
		return &raw, nil
	})
}

// pauseSchedule answers POST /v1/schedules/{name}/pause: paused = true is
// written in its table, its other fields kept; it fires no more until
// resumed (POST /v1/schedules/{name}/run still starts a run).
func (a *api) pauseSchedule(w http.ResponseWriter, r *http.Request, info authInfo) {
	a.setSchedulePaused(w, r, info, true)
}

// resumeSchedule answers POST /v1/schedules/{name}/resume: paused is
// removed from its table; its next fire time counts from now.
func (a *api) resumeSchedule(w http.ResponseWriter, r *http.Request, info authInfo) {
	a.setSchedulePaused(w, r, info, false)
}

// setSchedulePaused writes the schedule's table with paused set to on.
func (a *api) setSchedulePaused(w http.ResponseWriter, r *http.Request, info authInfo, on bool) {
	m, name, file := a.editedSchedule(w, r)
	if file == "" {
		return
	}
	verb := "resumed"
	if on {
		verb = "paused"
	}
	a.editSchedule(w, info, m, file, name, verb, http.StatusOK, func(cur *rawSchedule) (*rawSchedule, error) {
		if cur == nil {
			return nil, scheduleGone(file, name)
		}
		next := *cur
		next.Paused = on
		return &next, nil
	})
}

// deleteSchedule answers DELETE /v1/schedules/{name}: 200 once its table
// is removed and applied; a run it started goes on.
func (a *api) deleteSchedule(w http.ResponseWriter, r *http.Request, info authInfo) {
	m, name, file := a.editedSchedule(w, r)
	if file == "" {
		return
	}
	a.editSchedule(w, info, m, file, name, "deleted", http.StatusOK, func(cur *rawSchedule) (*rawSchedule, error) {
		if cur == nil {
			return nil, scheduleGone(file, name)
		}
		return nil, nil
	})
}

// editSchedule applies change to the table of schedule name in file
// (planScheduleEdit) and answers status with the schedule as listed (none
// once deleted), or the edit's error.
func (a *api) editSchedule(w http.ResponseWriter, info authInfo, m configManager, file, name, verb string, status int, change func(*rawSchedule) (*rawSchedule, error)) {
	err := m.editConfig(file, func() ([]byte, error) { return planScheduleEdit(file, name, change) })
	if err != nil {
		a.writeEditError(w, "schedule", name, err)
		return
	}
	a.logger.Info("schedule "+verb+" through the API", "schedule", name, "file", file, "key", info.key)
	body := map[string]any{"name": name, "file": file, "change": verb}
	if v, ok := a.scheduleView(name); ok {
		body["schedule"] = v
	}
	writeBody(w, status, a.globalSecrets.load().marshal(body, true))
}

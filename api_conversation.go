package main

import (
	"errors"
	"fmt"
	"net/http"
)

// This file holds the conversation routes: GET and DELETE
// /v1/conversations/{id} (the list is in api_list.go), and the answers to the conversation
// errors of POST /v1/runs. A conversation is seen only by the keys of its
// tenant and by admin keys; others get 404. Within one, a reader sees and
// deletes only the runs of tenants it sees.

// findConversation returns conversation id when info sees it, or answers
// 404 and returns nil.
func (a *api) findConversation(w http.ResponseWriter, id string, info authInfo) *conversation {
	c := a.visibleConversation(id, info)
	if c == nil {
		writeConversationError(w, &conversationNotFoundError{id: id})
	}
	return c
}

// visibleConversation returns conversation id when info sees it, else
// nil, the same for another tenant's as for none.
func (a *api) visibleConversation(id string, info authInfo) *conversation {
	c := a.runs.conversation(id)
	if c != nil && !info.sees(a.runs.tenantOf(c)) {
		a.audit.refuse("not_owner")
		c = nil
	}
	if c == nil {
		return nil
	}
	return c
}

// writeConversationError answers a *conversationNotFoundError or a
// *conversationTenantError (404) or a *conversationBusyError (409
// conversation_busy) and reports true, or reports false for any other
// error.
func writeConversationError(w http.ResponseWriter, err error) bool {
	var notFound *conversationNotFoundError
	var otherTenant *conversationTenantError
	var busy *conversationBusyError
	switch {
	case errors.As(err, &otherTenant):
		// Not confirmed to exist, as for findConversation.
		writeError(w, http.StatusNotFound, "not_found", (&conversationNotFoundError{id: otherTenant.conversation}).Error())
	case errors.As(err, &notFound):
		writeError(w, http.StatusNotFound, "not_found", err.Error())
	case errors.As(err, &busy):
		writeError(w, http.StatusConflict, "conversation_busy", err.Error())
	default:
		return false
	}
	return true
}

// getConversation answers GET /v1/conversations/{id}: the conversation
// with the ids of its runs the caller sees and every message of theirs in
// order, each with its run_id; 404 when the caller does not see it.
func (a *api) getConversation(w http.ResponseWriter, r *http.Request, info authInfo) {
	c := a.findConversation(w, r.PathValue("id"), info)
	if c == nil {
		return
	}
	body, err := a.conversationBody(c, info)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "internal", err.Error())
		return
	}
	writeBody(w, http.StatusOK, body)
}

// conversationBody returns c as GET /v1/conversations/{id} shows it to
// info: the runs info sees and their messages, redacted.
func (a *api) conversationBody(c *conversation, info authInfo) ([]byte, error) {
	v := a.runs.conversationView(c, info.sees)
	msgs, err := a.runs.conversationMessages(c, info.sees)
	if err != nil {
		a.logger.Warn("reading a conversation failed", "conversation", c.id, "err", err)
		return nil, err
	}
	v.Messages = msgs
	return a.globalSecrets.load().marshal(v, true), nil
}

// deleteConversation answers DELETE /v1/conversations/{id}: 204 once the
// conversation's runs the caller sees are forgotten and their files
// removed (the conversation goes with them unless others' runs stay); 409
// conversation_busy while a run of it is active; 404 when the caller does
// not see it.
func (a *api) deleteConversation(w http.ResponseWriter, r *http.Request, info authInfo) {
	c := a.findConversation(w, r.PathValue("id"), info)
	if c == nil {
		return
	}
	if err := a.runs.deleteConversation(c.id, info.sees); err != nil {
		if !writeConversationError(w, err) {
			writeError(w, http.StatusInternalServerError, "internal", fmt.Sprintf("delete conversation %s: %v", c.id, err))
		}
		return
	}
	a.logger.Info("conversation deleted", "conversation", c.id, "key", info.key)
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusNoContent)
}

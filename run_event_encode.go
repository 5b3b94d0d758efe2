package main

import (
	"strconv"
	"time"
)

// This file holds how a run's events are encoded: once, redacted, when
// they are emitted. The bytes made then are what every follower is sent,
// what the disk holds and what the history keeps; a replay from disk
// sends the same bytes again.

// redactor returns what the run may quote, for its events and for every
// answer about it: the run's own secrets once its servers are resolved,
// the manager's before (none for a run without either).
func (r *run) redactor() *redactor {
	if r.secrets == nil {
		if r.env == nil {
			return nil
		}
		return r.env.secrets.load()
	}
	return r.secrets.load()
}

// encodeEventData returns data as compact JSON with rd's secrets
// redacted; nil for no data.
func encodeEventData(rd *redactor, data any) []byte {
	if data == nil {
		return nil
	}
	return rd.marshal(data, false)
}

// newHistoryEvent returns the history event seq of type typ with data
// and its encoding raw (from encodeEventData), its frame set.
func newHistoryEvent(seq int, typ string, t time.Time, data any, raw []byte) runEvent {
	return newEvent(seq, typ, t, data, raw)
}

// newLiveEvent returns the live-only event of type typ with data and its
// encoding raw: its frame has no id and its JSON no seq, since it has no
// place in the history.
func newLiveEvent(typ string, t time.Time, data any, raw []byte) runEvent {
	return newEvent(0, typ, t, data, raw)
}

// newEvent returns the event seq (0 for a live one) with its frame and
// JSON encoded.
func newEvent(seq int, typ string, t time.Time, data any, raw []byte) runEvent {
	ev := runEvent{Seq: seq, Type: typ, Time: t, Data: data}
	b := make([]byte, 0, 64+2*len(typ)+len(raw))
	b = appendFrameHead(b, seq, typ)
	at := len(b)
	b = append(b, '{')
	if seq > 0 {
		b = append(b, `"seq":`...)
		b = strconv.AppendInt(b, int64(seq), 10)
	}
	b = appendEventBody(b, typ, t, raw)
	ev.encoded = b[at:len(b):len(b)]
	ev.frame = append(b, "\n\n"...)
	return ev
}

// storedEventFrame returns the frame of a history event read back from
// disk: line is its JSON as the log holds it, without the newline.
func storedEventFrame(seq int, typ string, line []byte) (frame, encoded []byte) {
	b := make([]byte, 0, 32+len(typ)+len(line))
	b = appendFrameHead(b, seq, typ)
	at := len(b)
	b = append(b, line...)
	encoded = b[at:len(b):len(b)]
	return append(b, "\n\n"...), encoded
}

// appendFrameHead appends the SSE lines before an event's data: its id
// (none for seq 0, a live event) and its type.
func appendFrameHead(b []byte, seq int, typ string) []byte {
	if seq > 0 {
		b = append(b, "id: "...)
		b = strconv.AppendInt(b, int64(seq), 10)
		b = append(b, '\n')
	}
	b = append(b, "event: "...)
	b = append(b, typ...)
	return append(b, "\ndata: "...)
}

// appendEventBody appends the type, time and data fields of an event's
// JSON and its closing brace, as encoding/json writes a runEvent (after
// its seq, with a comma) or a live event (first, without).
func appendEventBody(b []byte, typ string, t time.Time, raw []byte) []byte {
	if b[len(b)-1] != '{' {
		b = append(b, ',')
	}
	b = append(b, `"type":`...)
	b = appendJSONString(b, typ)
	b = append(b, `,"time":`...)
	b = append(b, '"')
	b = t.AppendFormat(b, time.RFC3339Nano)
	b = append(b, '"')
	if raw != nil {
		b = append(b, `,"data":`...)
		b = append(b, raw...)
	}
	return append(b, '}')
}

// appendJSONString appends s as a JSON string. Event types are plain
// names; anything else goes through the encoder.
func appendJSONString(b []byte, s string) []byte {
	for i := range len(s) {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' {
			return append(b, encodeCompact(s)...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"sync"
)

// This file holds what streamed model calls share: the call a provider
// hands its endpoint, reading a streamed answer as server-sent events
// (the transports' parser), and the endpoints that refused to stream.

// maxStreamEventBytes bounds one event of a streamed answer; the whole
// answer stays bounded by maxModelResponseBytes.
const maxStreamEventBytes = 1 << 20

// A modelCall is one model call as a provider hands it to its endpoint.
type modelCall struct {
	// encode returns the request body, asking for a streamed answer when
	// stream is set.
	encode func(stream bool) ([]byte, error)
	// decode reads a whole (not streamed) answer.
	decode func([]byte) (*modelResponse, error)
	// stream returns a fresh decoder of a streamed answer, one per
	// attempt; nil when the wire is never streamed.
	stream func() streamDecoder
	// onText and onRetry are the request's OnText and OnRetry; nil for
	// none.
	onText  func(text string)
	onRetry func(attempt int, err error)
}

// A streamDecoder assembles one streamed answer from its events. It is
// used by one goroutine.
type streamDecoder interface {
	// event takes the data of the next event and returns the text it
	// adds to the answer ("" for none) and whether the answer is
	// complete. An error ends the attempt; a *streamFailure says whether
	// another attempt may succeed.
	event(data []byte) (text string, done bool, err error)
	// response returns the answer assembled so far, or an error when the
	// events did not make a complete answer.
	response() (*modelResponse, error)
}

// A streamFailure is an error the model's server reported inside a
// streamed answer.
type streamFailure struct {
	msg   string
	retry bool // another attempt may succeed (overloaded, server error)
}

func (f *streamFailure) Error() string { return f.msg }

// streamRefusals holds the endpoints, as "url model", that refused a
// streamed request: for the life of the process they are called without
// streaming, and the refusal is logged once. Safe for concurrent use.
var streamRefusals sync.Map

// streams reports whether a call goes out streamed: the endpoint streams
// unless [model] stream = false or it refused streaming before.
func (e *modelEndpoint) streams() bool {
	if !e.stream {
		return false
	}
	_, refused := streamRefusals.Load(e.url + " " + e.modelName)
	return !refused
}

// refuseStream records that the endpoint refused streaming (why), so that
// it is called without it from now on; the first refusal is logged.
func (e *modelEndpoint) refuseStream(why error) {
	if _, known := streamRefusals.LoadOrStore(e.url+" "+e.modelName, struct{}{}); !known {
		e.logger.Warn("model refuses streaming; calling it without from now on (set [model] stream = false to skip the try)", "url", e.url, "error", why)
	}
}

// mentionsStream reports whether an error body speaks of streaming
// ("stream", "stream_options"): a 400 saying so refuses streaming, not the
// request.
func mentionsStream(body []byte) bool {
	return bytes.Contains(bytes.ToLower([]byte(errorBodyMessage(body))), []byte("stream"))
}

// readStream reads a streamed answer to its end, passing its text to
// c.onText as each event brings it. A stream that breaks or ends before
// the answer is complete is a retryable failure.
func (e *modelEndpoint) readStream(ctx, actx context.Context, body io.Reader, c modelCall) (*modelResponse, *attemptFailure) {
	limited := &io.LimitedReader{R: body, N: maxModelResponseBytes + 1}
	parser := newSSEParser(limited, maxStreamEventBytes)
	defer parser.release()
	dec := c.stream()
	for {
		ev, err := parser.next()
		if errors.Is(err, io.EOF) {
			if limited.N <= 0 {
				return nil, &attemptFailure{err: e.errorf("the answer from %s is larger than %d bytes", e.url, maxModelResponseBytes)}
			}
			if resp, err := dec.response(); err == nil {
				return resp, nil // a server that does not mark the end
			}
			return nil, &attemptFailure{retry: true, err: e.errorf("the answer from %s ended before it was complete", e.url)}
		}
		if err != nil {
			return nil, e.networkFailure(ctx, actx, "read the answer from", err)
		}
		if ev.tooLarge {
			return nil, &attemptFailure{err: e.errorf("an event of the answer from %s is larger than %d bytes", e.url, maxStreamEventBytes)}
		}
		data := ev.data
		if e.secrets.occurs(data) {
			data = []byte(e.secrets.redact(string(data)))
		}
		text, done, err := dec.event(data)
		if err != nil {
			var failure *streamFailure
			retry := errors.As(err, &failure) && failure.retry
			return nil, &attemptFailure{retry: retry, err: e.errorf("the answer from %s: %v", e.url, err)}
		}
		if text != "" && c.onText != nil {
			c.onText(text)
		}
		if done {
			resp, err := dec.response()
			if err != nil {
				return nil, &attemptFailure{err: e.errorf("decode the answer from %s: %v (is it an %s-compatible API?)", e.url, err, e.provider)}
			}
			return resp, nil
		}
	}
}

package main

import (
	"fmt"
	"math"
	"sync"
	"time"
)

// This file holds the rate of an API key's runs: a key with rate N may
// start N runs in any minute; past it, starting one more is refused with
// the wait until a slot frees (429 with Retry-After).

// rateWindow is the span a key's rate counts runs over.
const rateWindow = time.Minute

// keyRates remembers, per key with a rate, when its runs of the last
// minute started: at most rate times per key. Safe for concurrent use.
type keyRates struct {
	mu sync.Mutex
	// guards started
	started map[string][]time.Time // oldest first
}

// A rateError refuses a run past its key's rate.
type rateError struct {
	key        string
	rate       int
	retryAfter time.Duration
}

func (e *rateError) Error() string {
	return fmt.Sprintf("start run: key %q started %d runs in the last minute, its rate; retry after %s, or raise the key's rate",
		e.key, e.rate, e.retryAfter)
}

// reserve takes one of key's rate slots at now, or returns a *rateError
// when the last minute holds rate runs already. release gives the slot
// back, for a run that did not start after all. rate 0 bounds nothing.
func (k *keyRates) reserve(key string, rate int, now time.Time) (release func(), err error) {
	if rate <= 0 {
		return func() {}, nil
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.started == nil {
		k.started = map[string][]time.Time{}
	}
	times := k.started[key]
	cut := 0
	for cut < len(times) && now.Sub(times[cut]) >= rateWindow {
		cut++
	}
	times = times[cut:]
	if len(times) >= rate {
		k.started[key] = times
		wait := times[len(times)-rate].Add(rateWindow).Sub(now)
		return nil, &rateError{key: key, rate: rate, retryAfter: time.Duration(math.Ceil(wait.Seconds())) * time.Second}
	}
	k.started[key] = append(times, now)
	return func() { k.release(key, now) }, nil
}

// release forgets the slot key took at at.
func (k *keyRates) release(key string, at time.Time) {
	k.mu.Lock()
	defer k.mu.Unlock()
	times := k.started[key]
	for i := len(times) - 1; i >= 0; i-- {
		if times[i].Equal(at) {
			k.started[key] = append(times[:i], times[i+1:]...)
			break
		}
	}
	if len(k.started[key]) == 0 {
		delete(k.started, key)
	}
}

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkLiveFirstDelta measures how fast the model's text reaches a
// follower: per run, from the moment the fake model writes its first
// streamed chunk to the moment a follower of GET /v1/runs/{id}/events
// (SSE over HTTP, through the real API) has read the first model.delta.
// The follower is attached before the model starts writing. It reports
// the p50 and p99 of that time; each op is a whole run.
func BenchmarkLiveFirstDelta(b *testing.B) {
	origin := time.Now()
	sentAt := make([]atomic.Int64, b.N) // ns since origin, when chunk 0 was written
	attached := make([]chan struct{}, b.N)
	script := make([]fakeTurn, b.N)
	for i := range script {
		attached[i] = make(chan struct{})
		script[i] = fakeTurn{Chunks: []string{"The first words", " and the rest."}, OnChunk: func(chunk int) {
			if chunk == 0 {
				<-attached[i]
				sentAt[i].Store(int64(time.Since(origin)))
			}
		}}
	}
	f := newFakeModel(b, providerOpenAI, script...)
	reg := newRegistry(nil, registryOptions{Logger: benchLogger})
	b.Cleanup(reg.close)
	provider := f.provider(b)
	m := newRunManager(runManagerOptions{
		Registry: reg, Logger: benchLogger, Home: b.TempDir(), Metrics: newMetrics(),
		Model: modelSpec{Provider: providerOpenAI, Model: "fake-model"},
		newProvider: func(modelSpec, func(string) (string, bool), *slog.Logger) (modelProvider, error) {
			return provider, nil
		},
	})
	b.Cleanup(func() { m.shutdown(context.Background()) })
	srv := httptest.NewServer(newAPI(m, reg, nil, m.opts.Metrics, nil, nil))
	b.Cleanup(srv.Close)

	latencies := make([]time.Duration, b.N)
	b.ResetTimer()
	for i := range b.N {
		got, err := followFirstDelta(srv.URL, i, attached[i], origin)
		if err != nil {
			b.Fatal(err)
		}
		latencies[i] = got - time.Duration(sentAt[i].Load())
	}
	b.StopTimer()
	slices.Sort(latencies)
	b.ReportMetric(float64(latencies[len(latencies)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(latencies[len(latencies)*99/100].Microseconds())/1000, "p99-ms")
}

// followFirstDelta starts run i through the API, follows it, closes
// attached once the follower has the run's first event, reads the stream
// to its end and returns when it read the first model.delta, as the time
// since origin.
func followFirstDelta(url string, i int, attached chan struct{}, origin time.Time) (time.Duration, error) {
	resp, err := http.Post(url+"/v1/runs", "application/json", strings.NewReader(fmt.Sprintf(`{"prompt":"run %d"}`, i)))
	if err != nil {
		return 0, err
	}
	var started struct {
		RunID string `json:"run_id"`
	}
	err = json.NewDecoder(resp.Body).Decode(&started)
	resp.Body.Close()
	if err != nil || resp.StatusCode != http.StatusAccepted {
		return 0, fmt.Errorf("POST /v1/runs = %d, %v", resp.StatusCode, err)
	}
	stream, err := http.Get(url + "/v1/runs/" + started.RunID + "/events")
	if err != nil {
		return 0, err
	}
	defer stream.Body.Close()
	s := &streamReader{r: bufio.NewReader(stream.Body)}
	var at time.Duration
	for {
		ev, comment, err := s.next()
		if err == io.EOF {
			if at == 0 {
				return 0, fmt.Errorf("run %s: the stream ended without a model.delta", started.RunID)
			}
			return at, nil
		}
		if err != nil {
			return 0, err
		}
		switch {
		case comment != "":
		case ev.Event == evRunStarted:
			close(attached)
		case ev.Event == evModelDelta && at == 0:
			at = time.Since(origin)
		}
	}
}

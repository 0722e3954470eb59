package app

import (
	"crypto/rand"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lambda-agent/lambda-agent/internal/ddbhistory"
	"github.com/lambda-agent/lambda-agent/internal/telemetry"
	"github.com/lambda-agent/lambda-agent/internal/testkit/dynamodbtest"
	"github.com/lambda-agent/lambda-agent/internal/turn"
	"github.com/lambda-agent/lambda-agent/internal/turn/storetest"
)

// TestTracedStoreConformance: the store as the wiring decorates it, with
// tracing on, keeps the whole contract of turn.Store: the decorator passes
// every request and its outcome through.
func TestTracedStoreConformance(t *testing.T) {
	srv, err := dynamodbtest.NewServer("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	client := srv.Client()
	// Nothing listens at the endpoint: exports fail, which tracing only
	// logs.
	tracing := telemetry.NewTracing(telemetry.TracingConfig{Endpoint: "http://127.0.0.1:9/v1/traces", Timeout: time.Millisecond}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	t.Cleanup(func() { _ = tracing.Shutdown(t.Context()) })
	if !tracing.On() {
		t.Fatal("tracing is off")
	}
	var mu sync.Mutex
	now := time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)
	tick := func() time.Time { // List orders sessions by their creation
		mu.Lock()
		defer mu.Unlock()
		now = now.Add(time.Millisecond)
		return now
	}
	storetest.Run(t, func(t *testing.T) turn.Store {
		table := "sessions-" + strings.ToLower(rand.Text()[:12])
		if err := ddbhistory.CreateTable(t.Context(), client, table); err != nil {
			t.Fatal(err)
		}
		store, err := ddbhistory.New(client, ddbhistory.Config{Table: table, Now: tick})
		if err != nil {
			t.Fatal(err)
		}
		traced := traceStore(tracing, store, table)
		if _, ok := traced.(*tracedStore); !ok {
			t.Fatal("the store is not decorated")
		}
		return traced
	})
}

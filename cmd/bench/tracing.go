package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"time"
)

// collector is an OTLP/HTTP endpoint that accepts every export and counts
// the requests that carried spans.
type collector struct {
	*httptest.Server
	spans atomic.Int64
}

func newCollector() *collector {
	c := &collector{}
	c.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		if r.URL.Path == "/v1/traces" && n > 0 {
			c.spans.Add(1)
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	return c
}

// tracingOverhead times warm turns with tracing off and on, alternating
// the two stacks so that the machine's busy moments fall on both.
func tracingOverhead(ctx context.Context, cfg config, b *strings.Builder) error {
	col := newCollector()
	defer col.Close()
	off, err := newStack(ctx, nil)
	if err != nil {
		return err
	}
	defer off.Close()
	on, err := newStack(ctx, map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": col.URL})
	if err != nil {
		return err
	}
	defer on.Close()
	stacks := []*stack{off, on}
	own := make([][]time.Duration, 2)
	for _, s := range stacks {
		if err := s.fill(ctx, "tracing", 40); err != nil {
			return err
		}
		if _, err := s.chat(ctx, "tracing", "warm up"); err != nil {
			return err
		}
		s.timer.take()
		s.modelTimer.take()
	}
	for n := range cfg.warmTurns {
		for i, s := range stacks {
			start := time.Now()
			if _, err := s.chat(ctx, "tracing", fmt.Sprintf("turn %d", n)); err != nil {
				return err
			}
			total := time.Since(start)
			own[i] = append(own[i], total-s.modelTimer.take()-s.timer.take())
		}
	}
	if col.spans.Load() < int64(cfg.warmTurns) {
		return fmt.Errorf("tracing was on, and the collector received %d exports for %d turns", col.spans.Load(), cfg.warmTurns)
	}
	offMed, onMed := percentile(own[0], 50), percentile(own[1], 50)
	fmt.Fprintf(b, "### Tracing on and off\n\nA plain chat turn through the handler on a session of 40 messages, %d turns each, the two alternating, without the model's and DynamoDB's time. On, each turn records its spans (the invocation, the store's load and commit, the model call) and sends them to a collector in the bench process before it answers; that export is part of the figure.\n\n", cfg.warmTurns)
	b.WriteString("| tracing | without model and DynamoDB, median | p99 |\n|---|---|---|\n")
	fmt.Fprintf(b, "| off (no endpoint) | %s | %s |\n", ms(offMed), ms(percentile(own[0], 99)))
	fmt.Fprintf(b, "| on (OTLP/HTTP to a local collector) | %s | %s |\n\n", ms(onMed), ms(percentile(own[1], 99)))
	fmt.Fprintf(b, "Tracing on adds **%s** a turn. Off, no exporter starts, no span is recorded, and the model, tools and store are not wrapped; the handler only reads the X-Ray header.\n\n", ms(onMed-offMed))
	return nil
}

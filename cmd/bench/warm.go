package main

import (
	"context"
	"fmt"
	"strings"
	"time"
)

var sizes = []int{40, 1_000, 10_000}

// warmTurns times warm chat turns through the handler on sessions of
// different lengths with the same window, and takes out the model's time
// and the time spent in DynamoDB requests.
func warmTurns(ctx context.Context, cfg config, b *strings.Builder) error {
	type row struct {
		size                int
		total, noModel, own []time.Duration
		requests            float64
	}
	var rows []row
	for _, n := range sizes {
		s, err := newStack(ctx, nil)
		if err != nil {
			return err
		}
		id := fmt.Sprintf("warm-%d", n)
		if err := s.fill(ctx, id, n); err != nil {
			s.Close()
			return err
		}
		// One turn to warm up connections and caches.
		if _, err := s.chat(ctx, id, "warm up"); err != nil {
			s.Close()
			return err
		}
		s.timer.take()
		s.modelTimer.take()
		s.Meter.Take()
		r := row{size: n}
		for i := range cfg.warmTurns {
			start := time.Now()
			resp, err := s.chat(ctx, id, fmt.Sprintf("turn %d", i))
			total := time.Since(start)
			if err != nil {
				s.Close()
				return err
			}
			if resp.Metrics.ModelCalls != 1 {
				s.Close()
				return fmt.Errorf("a plain turn made %d model calls", resp.Metrics.ModelCalls)
			}
			ddb, modelTime := s.timer.take(), s.modelTimer.take()
			r.total = append(r.total, total)
			r.noModel = append(r.noModel, total-modelTime)
			r.own = append(r.own, total-modelTime-ddb)
		}
		r.requests = float64(s.Meter.Take().Requests) / float64(cfg.warmTurns)
		rows = append(rows, r)
		s.Close()
	}
	fmt.Fprintf(b, "### Warm turn overhead\n\nA plain chat turn through the handler, %d turns per size, on sessions of 40, 1,000 and 10,000 stored messages with the same window of 40. The model's time (the round trip to the stand-in, which answers at once) is taken out. The last two columns also take out the time spent in DynamoDB requests, which here is minidyn's: minidyn copies the whole table on every transaction, so its time grows with the table, which DynamoDB's does not.\n\n", cfg.warmTurns)
	b.WriteString("| stored messages | DynamoDB requests per turn | without model, median | p99 | without model and DynamoDB, median | p99 |\n|---|---|---|---|---|---|\n")
	for _, r := range rows {
		fmt.Fprintf(b, "| %d | %.1f | %s | %s | %s | %s |\n", r.size, r.requests,
			ms(percentile(r.noModel, 50)), ms(percentile(r.noModel, 99)), ms(percentile(r.own, 50)), ms(percentile(r.own, 99)))
	}
	first, last := rows[0], rows[len(rows)-1]
	ownRatio := float64(percentile(last.own, 50)) / float64(percentile(first.own, 50))
	allRatio := float64(percentile(last.noModel, 50)) / float64(percentile(first.noModel, 50))
	verdict := "met"
	if ownRatio > 1.2 {
		verdict = "**missed**"
	}
	fmt.Fprintf(b, "\nThe package's own overhead at 10,000 messages is **%.2f×** the figure at 40 (target ≤ 1.2×: %s). With minidyn's time included it is %.2f×; requests and bytes are flat at every size (next section).\n\n", ownRatio, verdict, allRatio)
	return nil
}

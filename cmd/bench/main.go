// Command bench measures lambda-agent and writes the results into
// BENCHMARKS.md:
//
//	go run ./cmd/bench            # or: make bench
//	go run ./cmd/bench -quick     # fewer runs, for a look
//	go run ./cmd/bench -o "" -stream-before /tmp/before-stream/bootstrap
//
// It measures, in one run, on this machine:
//   - cold start: the chat and stream functions built as real bootstraps
//     and started under a Lambda Runtime API emulator, from process start
//     to their first completed turn (for the stream function, a streamed
//     turn and an AG-UI run), judged against the SDK floor (a Go Lambda
//     that makes a first turn's requests through the AWS SDK and nothing
//     else), with a Go Lambda that only returns its event as the baseline;
//     and peak RSS. -stream-before adds a build of the stream function
//     from an earlier commit, timed in turn with this tree's;
//   - warm turn overhead, without the model's time, at 40, 1,000 and 10,000
//     stored messages;
//   - an AG-UI run against our own stream, through the stream function's
//     handler: time, allocations, bytes and DynamoDB requests, for a client
//     that sends the whole thread and one that sends only its new message;
//   - DynamoDB cost per turn (requests, bytes, RCU, WCU) for plain, tool and
//     summarizing turns at those sizes, against a store that keeps the whole
//     history in one item, as popular chat-history classes do;
//   - tool concurrency: four 100 ms tools in one turn.
//
// The Converse stand-in answers at once and DynamoDB runs in this process,
// so the figures are the package's own overhead. Ratios and counts carry over
// to other machines; absolute times do not.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/lambda-agent/lambda-agent/internal/testkit/mdsection"
)

func main() {
	quick := flag.Bool("quick", false, "fewer runs: a look, not a measurement")
	out := flag.String("o", "BENCHMARKS.md", "file to write the results into, between its bench markers; empty to only print")
	before := flag.String("stream-before", "", "the stream function's bootstrap built from an earlier commit, whose cold start to time in turn with this tree's (docs/testing.md)")
	chatBefore := flag.String("chat-before", "", "the chat function's bootstrap built from an earlier commit, timed in turn with this tree's, as -stream-before")
	flag.Parse()
	cfg := config{coldRuns: 25, warmTurns: 200, costTurns: 20}
	if *quick {
		cfg = config{coldRuns: 5, warmTurns: 30, costTurns: 6}
	}
	for _, b := range []struct {
		flag string
		to   *string
	}{{*before, &cfg.streamBefore}, {*chatBefore, &cfg.chatBefore}} {
		if b.flag == "" {
			continue
		}
		abs, err := filepath.Abs(b.flag)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(2)
		}
		*b.to = abs
	}
	ctx := context.Background()
	report, err := run(ctx, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
	fmt.Print(report)
	if *out != "" {
		if err := mdsection.Replace(*out, "bench", report); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		fmt.Fprintf(os.Stderr, "bench: wrote %s\n", *out)
	}
}

type config struct {
	coldRuns, warmTurns, costTurns int
	// streamBefore and chatBefore are builds of the stream and chat
	// functions to time against this tree's; empty for none.
	streamBefore, chatBefore string
}

func run(ctx context.Context, cfg config) (string, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "Machine: %d CPUs, %s/%s, %s. Date: %s. Command: `go run ./cmd/bench`.\n\n",
		runtime.NumCPU(), runtime.GOOS, runtime.GOARCH, runtime.Version(), time.Now().UTC().Format("2006-01-02"))
	for _, section := range []func(context.Context, config, *strings.Builder) error{coldStart, warmTurns, tracingOverhead, aguiOverhead, costs, toolConcurrency, tokenCost} {
		if err := section(ctx, cfg, &b); err != nil {
			return "", err
		}
	}
	return b.String(), nil
}

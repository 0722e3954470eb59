package main

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/lambda-agent/lambda-agent/internal/testkit"
	"github.com/lambda-agent/lambda-agent/internal/testkit/mcptest"
	"github.com/lambda-agent/lambda-agent/internal/testkit/runtimetest"
)

// coldStart times process start to first completed invocation, for the chat
// function (a whole chat turn: session load, model call, commit), for the
// stream function (a streamed turn, and an AG-UI run), for a Lambda that
// only returns its event, and for one that makes a first turn's requests
// through the AWS SDK and nothing else. With cfg.streamBefore, it times
// that build of the stream function too, against this tree's.
func coldStart(ctx context.Context, cfg config, b *strings.Builder) error {
	dir, err := os.MkdirTemp("", "bench-*")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	chat, err := runtimetest.Build(ctx, "./functions/chat", filepath.Join(dir, "chat"))
	if err != nil {
		return err
	}
	stream, err := runtimetest.Build(ctx, "./functions/stream", filepath.Join(dir, "stream"))
	if err != nil {
		return err
	}
	echo, err := runtimetest.Build(ctx, "./internal/testkit/runtimetest/echo", filepath.Join(dir, "echo"))
	if err != nil {
		return err
	}
	floor, err := runtimetest.Build(ctx, "./internal/testkit/runtimetest/sdkfloor", filepath.Join(dir, "sdkfloor"))
	if err != nil {
		return err
	}
	size := func(path string) float64 {
		st, _ := os.Stat(path)
		return float64(st.Size()) / (1 << 20)
	}

	backends, err := testkit.NewBackends(ctx, testkit.BackendOptions{})
	if err != nil {
		return err
	}
	defer backends.Close()
	env := append(backends.Env, "MODEL_ID=bench-model", "AWS_LAMBDA_LOG_FORMAT=JSON")

	type sample struct {
		init, first time.Duration
		rss         int64
	}
	// The chat function once more, with an MCP server configured: its init
	// starts listing the server's tools, and the first turn waits for them.
	mcp := mcptest.NewServer()
	defer mcp.Close()
	withMCP := fmt.Sprintf(`MCP_SERVERS=[{"name":"tickets","url":%q}]`, mcp.URL)
	// And with tracing on: its spans go to a collector in this process
	// before the invocation completes.
	collector := newCollector()
	defer collector.Close()
	withOTel := "OTEL_EXPORTER_OTLP_ENDPOINT=" + collector.URL
	// measure starts bin and times its first invocation with event, whose
	// response must hold want.
	measure := func(bin string, event []byte, want string, extra ...string) (sample, error) {
		var s sample
		fn, err := runtimetest.Start(ctx, bin, runtimetest.Config{Env: slices.Concat(env, extra), MemoryMB: 512})
		if err != nil {
			return s, err
		}
		inv, err := fn.InvokeAsync(ctx, event, 30*time.Second)
		if err != nil {
			fn.Close()
			return s, err
		}
		resp, err := inv.Wait(ctx)
		if err == nil && !strings.Contains(string(resp), want) {
			err = fmt.Errorf("the first invocation answered %s", resp)
		}
		if err != nil {
			fn.Close()
			return s, fmt.Errorf("%s: %w\n%s", bin, err, fn.Logs())
		}
		started := fn.StartedAt()
		s = sample{init: fn.ReadyAt().Sub(started), first: inv.Timing().Completed.Sub(started)}
		if err := fn.Close(); err != nil {
			return s, err
		}
		s.rss, err = fn.PeakRSS()
		return s, err
	}
	// They alternate, so that a busy moment on the machine falls on all.
	var chatSamples, mcpSamples, otelSamples, streamSamples, aguiSamples, beforeSamples, chatBeforeSamples, echoSamples, floorSamples []sample
	for i := range cfg.coldRuns {
		event, streamed, run, err := coldEvents(i)
		if err != nil {
			return err
		}
		c, err := measure(chat, event, chatAnswered)
		if err != nil {
			return err
		}
		m, err := measure(chat, event, chatAnswered, withMCP)
		if err != nil {
			return err
		}
		o, err := measure(chat, event, chatAnswered, withOTel)
		if err != nil {
			return err
		}
		otelSamples = append(otelSamples, o)
		st, err := measure(stream, streamed, streamAnswered)
		if err != nil {
			return err
		}
		a, err := measure(stream, run, runAnswered)
		if err != nil {
			return err
		}
		streamSamples, aguiSamples = append(streamSamples, st), append(aguiSamples, a)
		if cfg.streamBefore != "" {
			bf, err := measure(cfg.streamBefore, streamed, streamAnswered)
			if err != nil {
				return err
			}
			beforeSamples = append(beforeSamples, bf)
		}
		if cfg.chatBefore != "" {
			bf, err := measure(cfg.chatBefore, event, chatAnswered)
			if err != nil {
				return err
			}
			chatBeforeSamples = append(chatBeforeSamples, bf)
		}
		e, err := measure(echo, []byte(`{"hello":"world"}`), "")
		if err != nil {
			return err
		}
		f, err := measure(floor, []byte(`{}`), "")
		if err != nil {
			return err
		}
		chatSamples, mcpSamples, echoSamples, floorSamples = append(chatSamples, c), append(mcpSamples, m), append(echoSamples, e), append(floorSamples, f)
	}
	stats := func(s []sample) (init, med, p90 time.Duration, rss int64) {
		var inits, firsts []time.Duration
		for _, x := range s {
			inits = append(inits, x.init)
			firsts = append(firsts, x.first)
			rss = max(rss, x.rss)
		}
		return percentile(inits, 50), percentile(firsts, 50), percentile(firsts, 90), rss
	}
	ci, cm, c90, crss := stats(chatSamples)
	mi, mm, m90, mrss := stats(mcpSamples)
	oi, om, o90, orss := stats(otelSamples)
	si, sm, s90, srss := stats(streamSamples)
	ai, am, a90, arss := stats(aguiSamples)
	ei, em, e90, erss := stats(echoSamples)
	fi, fm, f90, frss := stats(floorSamples)
	fmt.Fprintf(b, "### Cold start\n\nFrom process start to the first completed invocation, %d runs each. The chat function's first invocation is a whole chat turn: it loads the session, calls the model and commits, against a Converse stand-in that answers at once and a DynamoDB in the bench process. The baseline is a Go Lambda that only returns its event. The SDK floor is a Go Lambda that builds the same two AWS clients and makes the same four requests as a first chat turn (Query, GetItem, Converse, TransactWriteItems) with nothing else: no chat function built on the AWS SDK for Go v2 starts faster. The stream function's first invocation is a whole turn too, through its function URL's event: a streamed chat turn (`POST /chat/stream`), or an AG-UI run with a new message (`POST /agui`), until the stream's last byte. All are built the way SAM builds them (`-tags lambda.norpc -trimpath -ldflags \"-s -w\"`, CGO off).\n\n", cfg.coldRuns)
	b.WriteString("| function | binary | init (median) | first response, median | p90 | peak RSS |\n|---|---|---|---|---|---|\n")
	fmt.Fprintf(b, "| chat (whole turn) | %.1f MB | %s | %s | %s | %.1f MB |\n", size(chat), ms(ci), ms(cm), ms(c90), float64(crss)/(1<<20))
	fmt.Fprintf(b, "| chat, one MCP server configured | %.1f MB | %s | %s | %s | %.1f MB |\n", size(chat), ms(mi), ms(mm), ms(m90), float64(mrss)/(1<<20))
	fmt.Fprintf(b, "| chat, traces exported over OTLP | %.1f MB | %s | %s | %s | %.1f MB |\n", size(chat), ms(oi), ms(om), ms(o90), float64(orss)/(1<<20))
	fmt.Fprintf(b, "| stream (whole turn, streamed) | %.1f MB | %s | %s | %s | %.1f MB |\n", size(stream), ms(si), ms(sm), ms(s90), float64(srss)/(1<<20))
	fmt.Fprintf(b, "| stream, an AG-UI run | %.1f MB | %s | %s | %s | %.1f MB |\n", size(stream), ms(ai), ms(am), ms(a90), float64(arss)/(1<<20))
	var bm time.Duration
	if cfg.streamBefore != "" {
		var bi, b90 time.Duration
		var brss int64
		bi, bm, b90, brss = stats(beforeSamples)
		fmt.Fprintf(b, "| stream before (`%s`), streamed turn | %.1f MB | %s | %s | %s | %.1f MB |\n", cfg.streamBefore, size(cfg.streamBefore), ms(bi), ms(bm), ms(b90), float64(brss)/(1<<20))
	}
	var cbm time.Duration
	if cfg.chatBefore != "" {
		var bi, b90 time.Duration
		var brss int64
		bi, cbm, b90, brss = stats(chatBeforeSamples)
		fmt.Fprintf(b, "| chat before (`%s`), whole turn | %.1f MB | %s | %s | %s | %.1f MB |\n", cfg.chatBefore, size(cfg.chatBefore), ms(bi), ms(cbm), ms(b90), float64(brss)/(1<<20))
	}
	fmt.Fprintf(b, "| SDK floor (the same four requests) | %.1f MB | %s | %s | %s | %.1f MB |\n", size(floor), ms(fi), ms(fm), ms(f90), float64(frss)/(1<<20))
	fmt.Fprintf(b, "| echo (baseline) | %.1f MB | %s | %s | %s | %.1f MB |\n\n", size(echo), ms(ei), ms(em), ms(e90), float64(erss)/(1<<20))
	b.WriteString(coldStartHeadline(cm, fm, crss))
	b.WriteString(coldStartBaseline(cm, fm, em))
	if cbm > 0 {
		b.WriteString(againstBefore("chat", cm, cbm))
	}
	b.WriteString(streamColdStart(sm, am, fm, bm))
	fmt.Fprintf(b, "With one MCP server configured (an in-process server built with the official SDK, answering at once), the first turn waits for the server's tools, which init began to list: **%s**, %s more than without.\n\n", ms(mm), ms(mm-cm))
	if spans := collector.spans.Load(); spans == 0 {
		return fmt.Errorf("tracing was on, and the collector received no spans")
	}
	fmt.Fprintf(b, "With tracing on (`OTEL_EXPORTER_OTLP_ENDPOINT` set to a collector in the bench process, which the invocation's spans reach before it completes), the first turn takes **%s**: %+.1f%% against tracing off. Off, the chat function starts no exporter and records no span; its figure is the first row.\n\n", ms(om), 100*(float64(om)/float64(cm)-1))

	// Where the chat function's init goes: Go's own trace of package
	// initialization, from one more start.
	fn, err := runtimetest.Start(ctx, chat, runtimetest.Config{Env: append(env, "GODEBUG=inittrace=1")})
	if err != nil {
		return err
	}
	_, err = fn.WaitReady(ctx)
	logs := fn.Logs()
	fn.Close()
	if err != nil {
		return err
	}
	inits := packageInits(logs)
	var total float64
	for _, p := range inits {
		total += p.ms
	}
	fmt.Fprintf(b, "Package initialization, by `GODEBUG=inittrace=1`, takes %.1f ms of the chat function's init (the trace slows it somewhat). The largest:\n\n| package | init |\n|---|---|\n", total)
	for _, p := range inits[:min(6, len(inits))] {
		fmt.Fprintf(b, "| `%s` | %.2f ms |\n", p.pkg, p.ms)
	}
	b.WriteString("\nMost of the package initialization is the AWS SDK's: its DynamoDB and Bedrock clients build their operation schemas and endpoint rules. The chat function does not link the strict JSON Schema compiler that the structured function uses for callers' schemas, whose initialization compiles every draft's meta-schema (about 5 ms); `functions/deps_test.go` keeps it out. The rest of the first response is the turn itself: a Query, a GetItem for the new session's id, a Converse call and a TransactWriteItems, each on a new connection and each the first use of its SDK operation, and usually the process's first garbage collection.\n\n")
	return nil
}

// coldStartHeadline judges the chat function's cold start against the SDK
// floor, which no chat function built on the AWS SDK for Go v2 can start
// faster than: the ratio of the medians, what lambda-agent adds on top, and
// the peak RSS against its target.
func coldStartHeadline(chat, floor time.Duration, rss int64) string {
	rssVerdict := "met"
	if rss > 40<<20 {
		rssVerdict = "**missed**"
	}
	return fmt.Sprintf("Ratio of medians, chat / SDK floor: **%.2f×**: what lambda-agent adds on top of the floor is **%s**. Peak RSS: **%.1f MB** (target ≤ 40 MB: %s).\n\n",
		float64(chat)/float64(floor), ms(chat-floor), float64(rss)/(1<<20), rssVerdict)
}

// coldStartBaseline says what echo is: only the baseline, a Go Lambda that
// starts and does nothing, which the SDK floor alone is several times, so
// that no target can be set against it.
func coldStartBaseline(chat, floor, echo time.Duration) string {
	return fmt.Sprintf("Echo is only the baseline: the start of a Go Lambda that does nothing. The SDK floor alone is **%.2f×** echo (chat: %.2f×), the cost of the AWS SDK for Go v2 and a first turn's four requests, so the chat function is judged against the floor, not against echo.\n\n",
		float64(floor)/float64(echo), float64(chat)/float64(echo))
}

// What the answers to the first invocations must hold: the chat turn's
// 200, the streamed turn's done event, and the AG-UI run's RUN_FINISHED.
const (
	chatAnswered   = `"statusCode":200`
	streamAnswered = "event: done\n"
	runAnswered    = `"type":"RUN_FINISHED"`
)

// coldEvents are the first invocations of cold start i: the chat
// function's chat turn, and the stream function's streamed turn and AG-UI
// run, each on a new session.
func coldEvents(i int) (chat, streamed, run []byte, err error) {
	ev, err := chatEvent(fmt.Sprintf("cold-%d", i), "Hello", "")
	if err != nil {
		return nil, nil, nil, err
	}
	ev.RequestContext.RequestID = fmt.Sprintf("r%d", i)
	if chat, err = json.Marshal(ev); err != nil {
		return nil, nil, nil, err
	}
	body, err := json.Marshal(map[string]string{"session_id": fmt.Sprintf("cold-stream-%d", i), "message": "Hello"})
	if err != nil {
		return nil, nil, nil, err
	}
	if streamed, err = coldURLEvent(i, "/chat/stream", body); err != nil {
		return nil, nil, nil, err
	}
	body, err = json.Marshal(newRunInput(fmt.Sprintf("cold-agui-%d", i), []aguiMessage{{ID: newID(), Role: "user", Content: "Hello"}}))
	if err != nil {
		return nil, nil, nil, err
	}
	run, err = coldURLEvent(i, "/agui", body)
	return chat, streamed, run, err
}

func coldURLEvent(i int, path string, body []byte) ([]byte, error) {
	ev, err := urlEvent("POST", path, body, nil)
	if err != nil {
		return nil, err
	}
	ev.RequestContext.RequestID = fmt.Sprintf("s%d", i)
	return json.Marshal(ev)
}

// streamColdStart says what the stream function's first turn takes,
// against the SDK floor and as an AG-UI run; and, when before is not 0,
// how it compares with the build of an earlier commit, whose target is 5%.
func streamColdStart(stream, agui, floor, before time.Duration) string {
	s := fmt.Sprintf("The stream function's first streamed turn takes **%s**, %.2f× the SDK floor; as an AG-UI run, whose `runId` is an idempotency key too, **%s** (%+.1f%%).\n\n",
		ms(stream), float64(stream)/float64(floor), ms(agui), 100*(float64(agui)/float64(stream)-1))
	if before > 0 {
		s += againstBefore("stream", stream, before)
	}
	return s
}

// againstBefore judges a function's median first response, now, against
// its build from before, timed in turn with it: at most 5% slower.
func againstBefore(function string, now, before time.Duration) string {
	change := float64(now)/float64(before) - 1
	verdict := "met"
	if change > 0.05 {
		verdict = "**missed**"
	}
	return fmt.Sprintf("Against the %s function built before, measured in turn with it: **%+.1f%%** (target ≤ +5%%: %s).\n\n", function, 100*change, verdict)
}

type packageInit struct {
	pkg string
	ms  float64
}

// packageInits reads the lines of GODEBUG=inittrace=1, such as
// "init github.com/x/y @5.0 ms, 8.7 ms clock, 1701064 bytes, 21284 allocs",
// largest first.
func packageInits(logs string) []packageInit {
	var out []packageInit
	for _, line := range strings.Split(logs, "\n") {
		var p packageInit
		var at float64
		if _, err := fmt.Sscanf(line, "init %s @%f ms, %f ms clock", &p.pkg, &at, &p.ms); err == nil {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b packageInit) int { return cmp.Compare(b.ms, a.ms) })
	return out
}

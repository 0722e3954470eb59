package httpapi_test

import (
	"strings"
	"testing"

	"github.com/lambda-agent/lambda-agent/internal/testkit/conversetest"
)

// TestCacheTokensAreReported: the prompt cache's read and write tokens,
// as Bedrock reports them, reach the answer's usage, summed over the
// turn's model calls, the stream's done event, and the request's log line.
func TestCacheTokensAreReported(t *testing.T) {
	a := newAPI(t, nil)
	a.model.Enqueue(
		conversetest.ToolUse("c1", "calculator", map[string]string{"expression": "1+1"}).WithCacheUsage(10, 2000, 0, 5),
		conversetest.Text("2").WithCacheUsage(20, 1500, 600, 3),
	)
	r := a.chat(t, "", "cached", "1+1?")
	usage, _ := r.body["usage"].(map[string]any)
	if r.status != 200 || usage["cache_read_input_tokens"] != 3500.0 || usage["cache_write_input_tokens"] != 600.0 ||
		usage["input_tokens"] != 30.0 || usage["total_tokens"] != 4138.0 {
		t.Errorf("%d usage %v", r.status, usage)
	}
	if !strings.Contains(a.logs.String(), `"cache_read_input_tokens":3500,"cache_write_input_tokens":600`) {
		t.Errorf("the log line lacks the cache tokens:\n%s", a.logs.String())
	}

	srv := a.streamServer(t)
	a.model.Enqueue(conversetest.Text("streamed").WithCacheUsage(7, 900, 100, 2))
	evs := streamAll(t, srv, map[string]any{"session_id": "cached-stream", "message": "hi"}, nil)
	done := named(evs, "done")
	if u, _ := done["usage"].(map[string]any); u["cache_read_input_tokens"] != 900.0 || u["cache_write_input_tokens"] != 100.0 {
		t.Errorf("done usage %v", done["usage"])
	}
}

// TestOldToolResultsAreTrimmedForTheModel: with TOOL_RESULT_TRIM_BYTES
// set, the next turn's request carries a note in place of an earlier
// turn's large result, and the session keeps the result whole.
func TestOldToolResultsAreTrimmedForTheModel(t *testing.T) {
	a := newAPI(t, map[string]string{"TOOL_RESULT_TRIM_BYTES": "64", "TOOL_RESULT_TRIM_TURNS": "1"})
	a.model.Enqueue(conversetest.ToolUse("t1", "current_time", map[string]string{}), conversetest.Text("It is now."))
	if r := a.chat(t, "", "trim", "what time is it?"); r.status != 200 {
		t.Fatalf("%d %s", r.status, r.raw)
	}
	a.model.Enqueue(conversetest.Text("Noted."))
	if r := a.chat(t, "", "trim", "thanks"); r.status != 200 {
		t.Fatalf("%d %s", r.status, r.raw)
	}
	reqs := a.model.Requests()
	sent := reqs[len(reqs)-1].Messages[2].Content[0].ToolResult
	if sent == nil || !strings.Contains(sent.Content[0].Text, "was trimmed") {
		t.Errorf("the model got %+v", reqs[len(reqs)-1].Messages[2])
	}
	if stored := a.transcript(t, "", "trim").raw; !strings.Contains(stored, `"weekday"`) || strings.Contains(stored, "was trimmed") {
		t.Errorf("the session does not keep the result whole: %s", stored)
	}
}

// TestEstimatedCost: the answer's metrics carry the turn's cost at the
// model's prices, MODEL_PRICES when set; a model whose prices are unknown
// gets none.
func TestEstimatedCost(t *testing.T) {
	a := newAPI(t, map[string]string{"MODEL_PRICES": `{"input":3,"output":15,"cache_read":0.3,"cache_write":3.75}`})
	a.model.Enqueue(conversetest.Text("priced").WithCacheUsage(1000, 100_000, 10_000, 500))
	r := a.chat(t, "", "priced", "how much?")
	metrics, _ := r.body["metrics"].(map[string]any)
	if cost, _ := metrics["estimated_cost_usd"].(float64); r.status != 200 || cost < 0.0779 || cost > 0.0781 {
		t.Errorf("%d metrics %v, want a cost of 0.078", r.status, metrics)
	}
	b := newAPI(t, nil) // test-model: in no price table
	b.model.Enqueue(conversetest.Text("unpriced"))
	r = b.chat(t, "", "unpriced", "how much?")
	if metrics, _ := r.body["metrics"].(map[string]any); metrics["estimated_cost_usd"] != nil {
		t.Errorf("a cost for a model with unknown prices: %v", metrics)
	}
}

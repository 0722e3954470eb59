package httpapi_test

import (
	"strings"
	"testing"

	"github.com/lambda-agent/lambda-agent/internal/conversetest"
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

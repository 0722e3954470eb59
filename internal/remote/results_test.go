package remote_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/app"
	"github.com/lambda-agent/lambda-agent/internal/remote"
	"github.com/lambda-agent/lambda-agent/internal/testkit"
	"github.com/lambda-agent/lambda-agent/internal/testkit/conversetest"
	"github.com/lambda-agent/lambda-agent/internal/testkit/lambdatest"
	"github.com/lambda-agent/lambda-agent/internal/testkit/mcptest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// hostileServer is an MCP server whose tools answer what Bedrock would
// refuse, or more than anyone should store.
func hostileServer(t *testing.T) string {
	t.Helper()
	srv := mcptest.Answers(map[string][]mcp.Content{
		"mislabelled": {&mcp.TextContent{Text: "a chart"}, &mcp.ImageContent{MIMEType: "image/png", Data: conversetest.JPEGStart}},
		"empty":       nil,
		"blank":       {&mcp.TextContent{Text: "  "}},
		"huge":        {&mcp.TextContent{Text: strings.Repeat("twenty MiB of text, ", 1<<20)}},
		"endless":     {&mcp.TextContent{Text: strings.Repeat("x", remote.MaxResponseBytes+1)}},
		"images":      {&mcp.ImageContent{MIMEType: "image/png", Data: pngOf(3_000_000)}, &mcp.ImageContent{MIMEType: "image/png", Data: pngOf(3_000_000)}},
	})
	t.Cleanup(srv.Close)
	return srv.URL
}

func pngOf(n int) []byte {
	b := make([]byte, n)
	copy(b, conversetest.PNGStart)
	return b
}

// TestHostileResultsThroughTheHandler: remote tools that answer what
// Bedrock refuses (a JPEG labelled PNG, nothing at all), 20 MiB, or more
// images than a result may hold reach the model as results it accepts:
// the turn answers 200, the strict stand-in sees no request Bedrock would
// refuse, the session keeps what the model saw, and the next turn works.
func TestHostileResultsThroughTheHandler(t *testing.T) {
	fn := lambdatest.NewServer()
	t.Cleanup(fn.Close)
	// The test is of the result's size, not of time: a machine busy with
	// the whole race suite may take longer than Lambda's default 3 s to
	// encode 4.5 MB.
	fn.RegisterWithConfig("dump", func(context.Context, []byte) ([]byte, error) {
		return json.Marshal(strings.Repeat("log line\n", 500_000)) // 4.5 MB: Lambda returns at most 6 MB
	}, lambdatest.Config{Timeout: 30 * time.Second})
	s := testkit.Start(t, testkit.Options{
		Env: map[string]string{
			"MCP_SERVERS":  fmt.Sprintf(`[{"name":"h","url":%q}]`, hostileServer(t)),
			"LAMBDA_TOOLS": `[{"name":"dump","function":"dump","description":"Dumps the log.","input_schema":{"type":"object"}}]`,
		},
		Remote: app.Remote{Lambda: fn.Client()},
	})
	s.Model.Enqueue(
		conversetest.ToolUse("u-mis", "h_mislabelled", map[string]any{}).
			WithToolUse("u-empty", "h_empty", map[string]any{}).
			WithToolUse("u-blank", "h_blank", map[string]any{}).
			WithToolUse("u-huge", "h_huge", map[string]any{}).
			WithToolUse("u-images", "h_images", map[string]any{}).
			WithToolUse("u-dump", "dump", map[string]any{}),
		conversetest.Text("Done."),
	)
	code, answer := chat(t, s, "hostile", "use them all")
	if code != 200 || answer["text"] != "Done." {
		t.Fatalf("%d %v", code, answer["error"])
	}
	rs := results(t, answer)
	if r := rs["u-mis"]; r["status"] != "error" || !strings.Contains(firstText(r), "content[1].image: the bytes are not a PNG image (they look like JPEG)") {
		t.Errorf("the mislabelled image: %v", r)
	}
	for _, id := range []string{"u-empty", "u-blank"} {
		if r := rs[id]; r["status"] != "success" || firstText(r) != "The tool returned no output." {
			t.Errorf("%s: %v", id, r)
		}
	}
	for id, full := range map[string]int{"u-huge": 20 << 20, "u-dump": 4_500_000} {
		text := firstText(rs[id])
		if len(text) > agent.DefaultMaxToolResultBytes+100 || !strings.Contains(text, fmt.Sprintf("of %d bytes truncated", full)) {
			t.Errorf("%s: %d bytes: %.80q", id, len(text), text)
		}
	}
	if parts := rs["u-images"]["content"].([]any); len(parts) != 2 || !strings.Contains(firstText(rs["u-images"]), "[an image of 3000000 bytes, left out") {
		t.Errorf("images: %.300v", parts)
	}
	// The session keeps what the model saw, and the next turn sends it
	// to the strict stand-in again.
	var stored []agent.Message
	for cursor := ""; ; {
		w := s.Serve(httptest.NewRequestWithContext(t.Context(), "GET", "/sessions/hostile?cursor="+cursor, nil))
		var page struct {
			Messages   []agent.Message
			NextCursor string `json:"next_cursor"`
		}
		if err := json.Unmarshal(w.Body.Bytes(), &page); err != nil || w.Code != 200 {
			t.Fatalf("GET: %d, %v", w.Code, err)
		}
		stored = append(stored, page.Messages...)
		if cursor = page.NextCursor; cursor == "" {
			break
		}
	}
	if err := agent.ValidateHistory(stored); err != nil || len(stored) != 4 {
		t.Errorf("the stored history, %d messages: %v", len(stored), err)
	}
	// An answer past remote.MaxResponseBytes fails its call, with the
	// reason, and the server's next call works.
	s.Model.Enqueue(conversetest.ToolUse("u-endless", "h_endless", map[string]any{}), conversetest.ToolUse("u-empty2", "h_empty", map[string]any{}), conversetest.Text("Still fine."))
	code, answer = chat(t, s, "hostile", "and now?")
	if code != 200 || answer["text"] != "Still fine." {
		t.Fatalf("the next turn: %d %v", code, answer["error"])
	}
	rs = results(t, answer)
	if r := rs["u-endless"]; r["status"] != "error" || !strings.Contains(firstText(r), "larger than 24 MiB") {
		t.Errorf("an answer past remote.MaxResponseBytes: %.300v", r)
	}
	if r := rs["u-empty2"]; r["status"] != "success" {
		t.Errorf("the call after it: %.300v", r)
	}
}

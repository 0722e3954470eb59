package reliability_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/lambdahttp"
	"github.com/lambda-agent/lambda-agent/internal/testkit/conversetest"
	"github.com/lambda-agent/lambda-agent/internal/testkit/mcptest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// hostileMCP is an MCP server whose tools answer what no session should
// store as it comes: 20 MiB of text, a JPEG labelled PNG, nothing at all,
// and 1 MiB of text that JSON escapes twice over in Lambda's response
// event.
func hostileMCP(t *testing.T) string {
	t.Helper()
	srv := mcptest.Answers(map[string][]mcp.Content{
		"huge":        {&mcp.TextContent{Text: strings.Repeat("x", 20<<20)}},
		"mislabelled": {&mcp.ImageContent{MIMEType: "image/png", Data: conversetest.JPEGStart}},
		"empty":       nil,
		"quotes":      {&mcp.TextContent{Text: strings.Repeat(`"\`, 512<<10)}},
	})
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestHostileRemoteContentThroughTheBuiltFunction runs the chat bootstrap
// against a hostile MCP server: its results reach the model as ones
// Bedrock accepts and the session keeps them bounded; a turn whose results
// are 16 MiB in the response event answers within Lambda's 6 MB, the
// emulator's limit, and so does its keyed retry, which calls nothing
// again; another owner gets 404; a kill while the model reads a large
// result leaves the session as it was. The process's peak RSS with a 20 MiB
// result stays far inside the template's 512 MB.
func TestHostileRemoteContentThroughTheBuiltFunction(t *testing.T) {
	t.Parallel()
	b := newSandbox(t, fmt.Sprintf(`MCP_SERVERS=[{"name":"h","url":%q}]`, hostileMCP(t)), "MAX_TOOL_RESULT_BYTES=1048576")
	damaged := 0
	send := func(what string, ev []byte) (int, string) {
		t.Helper()
		out, err := b.fn.Invoke(t.Context(), ev, 30*time.Second)
		if err != nil {
			damaged++
			t.Fatalf("%s: the invocation failed: %v", what, err)
		}
		if len(out) > lambdahttp.MaxResponseBytes {
			damaged++
			t.Errorf("%s: the response is %d bytes", what, len(out))
		}
		var resp events.APIGatewayV2HTTPResponse
		if err := json.Unmarshal(out, &resp); err != nil {
			t.Fatalf("%s: %.300s", what, out)
		}
		return resp.StatusCode, resp.Body
	}

	// Hostile results are results the model and the store accept.
	b.model.Enqueue(
		conversetest.ToolUse("u-huge", "h_huge", map[string]any{}).
			WithToolUse("u-mis", "h_mislabelled", map[string]any{}).
			WithToolUse("u-empty", "h_empty", map[string]any{}),
		conversetest.Text("Read them."),
	)
	status, raw := send("hostile results", chatEvent(t, "fetch"))
	rs := resultsOf(t, raw)
	if status != 200 || rs["u-huge"] == nil || rs["u-mis"] == nil || rs["u-empty"] == nil ||
		!strings.Contains(rs["u-huge"].Content[0].Text, fmt.Sprintf("of %d bytes truncated", 20<<20)) ||
		rs["u-mis"].Status != agent.ToolError || rs["u-empty"].Content[0].Text != "The tool returned no output." {
		damaged++
		t.Errorf("hostile results: %d %.500s", status, raw)
	}
	rss, err := b.fn.PeakRSS()
	if err != nil {
		t.Fatal(err)
	}
	if rss > 200<<20 {
		t.Errorf("peak RSS %d MiB with a 20 MiB result", rss>>20)
	}

	// 4 MiB of escapes, 16 MiB in the response event: within 6 MB, with
	// the message of results referenced, and so is the keyed retry.
	quotes := conversetest.ToolUse("q0", "h_quotes", map[string]any{})
	for i := 1; i < 4; i++ {
		quotes = quotes.WithToolUse(fmt.Sprintf("q%d", i), "h_quotes", map[string]any{})
	}
	b.model.Enqueue(quotes, conversetest.Text("Quoted."))
	keyed := keyedChatEvent(t, "crashy", "quote", "k-quotes")
	status, first := send("a large answer", keyed)
	if status != 200 || !strings.Contains(first, `"reference":{"index":6,`) {
		damaged++
		t.Errorf("a large answer: %d %.500s", status, first)
	}
	calls := b.model.Calls()
	if status, again := send("its keyed retry", keyed); status != 200 || again != first || b.model.Calls() != calls {
		damaged++
		t.Errorf("the retry: %d, the same answer %v, %d model calls more", status, again == first, b.model.Calls()-calls)
	}

	// Another owner.
	foreign := sandboxEvent(t, "GET", "/sessions/crashy", nil, "")
	var ev events.APIGatewayV2HTTPRequest
	_ = json.Unmarshal(foreign, &ev)
	ev.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{JWT: &events.APIGatewayV2HTTPRequestContextAuthorizerJWTDescription{Claims: map[string]string{"sub": "mallory"}}}
	foreign, _ = json.Marshal(ev)
	if status, raw := send("another owner", foreign); status != 404 {
		damaged++
		t.Errorf("another owner: %d %.300s", status, raw)
	}

	// A kill while the model reads a large result. (1 MiB: the race
	// detector makes reading 20 MiB take longer than waitFor waits.)
	before := storedIn(t, b.store, "", "crashy")
	b.model.Enqueue(conversetest.ToolUse("k-quotes", "h_quotes", map[string]any{}), conversetest.Text("never sent").WithDelay(time.Minute))
	calls = b.model.Calls()
	inv, err := b.fn.InvokeAsync(t.Context(), chatEvent(t, "doomed"), 30*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the model call that reads the result", func() bool { return b.model.Calls() == calls+2 })
	b.kill(t, inv, "while the model reads the result")
	if diff := before.diff(storedIn(t, b.store, "", "crashy")); diff != "" {
		damaged++
		t.Errorf("the killed turn changed the session:\n%s", diff)
	}
	b.model.Reset()
	if err := b.fn.Restart(t.Context()); err != nil {
		t.Fatal(err)
	}
	if status, raw := send("after the kill", chatEvent(t, "still there?")); status != 200 {
		damaged++
		t.Errorf("after the kill: %d %.300s", status, raw)
	}
	validHistory(t, storedIn(t, b.store, "", "crashy").messages)
	report(t, "Hostile remote content (20 MiB, a mislabelled image, nothing, 16 MiB of escapes in the response event) through the built function: the model and the session get bounded results Bedrock accepts, every answer and its keyed replay stays within Lambda's 6 MB, another owner gets 404, and a kill leaves the session as it was",
		fmt.Sprintf("4 turns of the chat bootstrap against a hostile MCP server, 1 keyed retry, 1 foreign read, 1 SIGKILL; peak RSS %d MiB with a 20 MiB result", rss>>20), damaged)
}

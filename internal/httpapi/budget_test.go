package httpapi_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-lambda-go/lambdaurl"
	"github.com/google/go-cmp/cmp"
	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/httpapi"
	"github.com/lambda-agent/lambda-agent/internal/lambdahttp"
	"github.com/lambda-agent/lambda-agent/internal/testkit/conversetest"
	"github.com/lambda-agent/lambda-agent/internal/testkit/mcptest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// escapes is text that JSON escapes, and Lambda's response event escapes
// again: each of its bytes takes four in the event.
func escapes(n int) string { return strings.Repeat(`"\`, n/2) }

// quotesServer is an MCP server whose tools answer 1 MiB of escapes, and
// that and an image of 3.5 MB.
func quotesServer(t *testing.T) string {
	t.Helper()
	png := make([]byte, 3_500_000)
	copy(png, conversetest.PNGStart)
	srv := mcptest.Answers(map[string][]mcp.Content{
		"quotes": {&mcp.TextContent{Text: escapes(1 << 20)}},
		"both":   {&mcp.TextContent{Text: escapes(1 << 20)}, &mcp.ImageContent{MIMEType: "image/png", Data: png}},
	})
	t.Cleanup(srv.Close)
	return srv.URL
}

// invokeRaw sends req to the chat function as Lambda would, through
// aws-lambda-go's own handler, and returns the invocation's response as
// its runtime sends it: the bytes Lambda's 6 MB limit counts.
func (a *api) invokeRaw(t *testing.T, req request) ([]byte, response) {
	t.Helper()
	return a.invokeRawWith(t, req, func(*events.APIGatewayV2HTTPRequest) {})
}

// invokeRawWith is invokeRaw of the event edit makes of req's.
func (a *api) invokeRawWith(t *testing.T, req request, edit func(*events.APIGatewayV2HTTPRequest)) ([]byte, response) {
	t.Helper()
	e := req.event(t)
	edit(&e)
	event, err := json.Marshal(e)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ctx = lambdacontext.NewContext(ctx, &lambdacontext.LambdaContext{AwsRequestID: e.RequestContext.RequestID})
	out, err := lambda.NewHandler(a.chatFn).Invoke(ctx, event)
	if err != nil {
		t.Fatal(err)
	}
	var resp events.APIGatewayV2HTTPResponse
	if err := json.Unmarshal(out, &resp); err != nil {
		t.Fatal(err)
	}
	r := response{status: resp.StatusCode, headers: resp.Headers, raw: resp.Body}
	if err := json.Unmarshal([]byte(resp.Body), &r.body); err != nil {
		t.Fatalf("%d: %.300s", resp.StatusCode, resp.Body)
	}
	if len(out) > lambdahttp.MaxResponseBytes {
		t.Errorf("%s: the invocation's response is %d bytes; Lambda returns at most %d", req.route, len(out), lambdahttp.MaxResponseBytes)
	}
	return out, r
}

// readURL reads a reference through the stream function's URL, which
// streams: GET /sessions/{id}?cursor=...&limit=1, and &agent=... for a
// sub-agent's message, served by aws-lambda-go's lambdaurl as the stream
// function serves it.
func (a *api) readURL(t *testing.T, session string, ref map[string]any) agent.Message {
	t.Helper()
	fn := lambdaurl.Wrap(a.handler(t, httpapi.FunctionURLRoutes))
	q := url.Values{"cursor": {ref["cursor"].(string)}, "limit": {"1"}}
	if name, ok := ref["agent"].(string); ok {
		q.Set("agent", name)
	}
	resp, err := fn(t.Context(), &events.LambdaFunctionURLRequest{
		RawPath: "/sessions/" + session, RawQueryString: q.Encode(),
		RequestContext: events.LambdaFunctionURLRequestContext{HTTP: events.LambdaFunctionURLRequestContextHTTPDescription{Method: "GET", Path: "/sessions/" + session}},
	})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	var page httpapi.SessionResponse
	if err := json.Unmarshal(body, &page); err != nil || resp.StatusCode != 200 || len(page.Messages) != 1 || page.First != int(ref["index"].(float64)) {
		t.Fatalf("the function URL: %d, %v, first %d: %.300s", resp.StatusCode, err, page.First, body)
	}
	raw, _ := json.Marshal(page.Messages[0])
	if len(raw) != int(ref["bytes"].(float64)) {
		t.Errorf("the reference says %v bytes; the message is %d", ref["bytes"], len(raw))
	}
	return page.Messages[0]
}

// readPages reads a session's transcript or export, whose first page the
// fixture asks for, page by page through the HTTP API, each invoked as
// Lambda would, and every reference through the stream function's URL. It
// returns the messages and the number of pages.
func (a *api) readPages(t *testing.T, fixture, session string) ([]agent.Message, int) {
	t.Helper()
	var got []agent.Message
	pages := 0
	for cursor := ""; ; {
		pages++
		req := request{route: fixture, session: session}
		if cursor != "" {
			req.query = map[string]string{"cursor": cursor}
		}
		_, page := a.invokeRaw(t, req)
		if page.status != 200 {
			t.Fatalf("%s: %d %.300s", fixture, page.status, page.raw)
		}
		for _, m := range messagesOf(page) {
			if ref := reference(m); ref != nil {
				got = append(got, a.readURL(t, session, ref))
				continue
			}
			var msg agent.Message
			raw, _ := json.Marshal(m)
			if err := json.Unmarshal(raw, &msg); err != nil {
				t.Fatal(err)
			}
			got = append(got, msg)
		}
		if cursor, _ = page.body["next_cursor"].(string); cursor == "" {
			return got, pages
		}
	}
}

// reference returns the reference a message of an answer or a page is, or
// nil for a message.
func reference(m any) map[string]any {
	r, _ := m.(map[string]any)["reference"].(map[string]any)
	return r
}

// TestAnswersFitLambdasLimit: a turn whose tool results are 4 MiB of text
// that JSON escapes, and the event escapes again, 16 MiB in the response
// event, is answered within Lambda's 6 MB: the message of results is a
// reference (its index, size and cursor), which the stream function's URL
// serves whole, and so is its replay. The transcript page that holds it
// fits too.
func TestAnswersFitLambdasLimit(t *testing.T) {
	a := newAPI(t, map[string]string{
		"MCP_SERVERS":           fmt.Sprintf(`[{"name":"q","url":%q}]`, quotesServer(t)),
		"MAX_TOOL_RESULT_BYTES": "1048576",
		"DIRECT_TOOLS":          "q_both",
	})
	use := conversetest.ToolUse("u0", "q_quotes", map[string]any{})
	for i := 1; i < 4; i++ {
		use = use.WithToolUse(fmt.Sprintf("u%d", i), "q_quotes", map[string]any{})
	}
	a.model.Enqueue(conversetest.Text("Hello.")) // the session's first turn
	a.model.Enqueue(use, conversetest.Text(escapes(1000)))
	if r := a.chat(t, "", "big", "hello"); r.status != 200 {
		t.Fatal(r.raw)
	}
	chat := request{route: "chat-new.json", body: map[string]any{"session_id": "big", "message": "quote me"}, headers: map[string]string{"Idempotency-Key": "k-big"}}
	_, r := a.invokeRaw(t, chat)
	if r.status != 200 || r.body["text"] != escapes(1000) {
		t.Fatalf("%d %.300s", r.status, r.raw)
	}
	msgs := messagesOf(r)
	if len(msgs) != 4 || reference(msgs[0]) != nil || reference(msgs[1]) != nil || reference(msgs[3]) != nil {
		t.Fatalf("%d messages: %.500s", len(msgs), r.raw)
	}
	ref := reference(msgs[2])
	if ref == nil || ref["index"] != 4.0 || msgs[2].(map[string]any)["role"] != "user" {
		t.Fatalf("the message of results: %.300v", msgs[2])
	}
	whole := a.readURL(t, "big", ref)
	if rs := whole.Content; len(rs) != 4 || rs[0].ToolResult == nil || rs[0].ToolResult.Content[0].Text != escapes(1<<20) {
		t.Errorf("the message read through the URL: %d blocks", len(rs))
	}

	// The replay answers the same, references included.
	_, again := a.invokeRaw(t, chat)
	if diff := cmp.Diff(msgs, messagesOf(again)); again.headers["Idempotent-Replayed"] != "true" || diff != "" {
		t.Errorf("the replay (%s), messages (-first +replay):\n%.3000s", again.headers["Idempotent-Replayed"], diff)
	}

	// The transcript, page by page through the HTTP API: every page fits,
	// the message too large for any is a reference, and the rest come
	// whole.
	got, _ := a.readPages(t, "session-get.json", "big")
	if len(got) != 6 || len(got[4].Content) != 4 || got[5].Content[0].Text != escapes(1000) {
		t.Errorf("the transcript read back: %d messages", len(got))
	}
	if err := agent.ValidateHistory(got); err != nil {
		t.Error(err)
	}

	// A direct call whose result alone is too large for its answer: the
	// recorded message is a reference, and the content a note.
	callReq := request{route: "tool-call.json", session: "big", body: map[string]any{}}
	_, call := a.invokeRawWith(t, callReq, func(e *events.APIGatewayV2HTTPRequest) {
		e.PathParameters["name"] = "q_both"
		e.RawPath = strings.Replace(e.RawPath, "/tools/calculator", "/tools/q_both", 1)
	})
	content, _ := call.body["content"].([]any)
	if call.status != 200 || call.body["status"] != "success" || len(content) != 1 ||
		!strings.Contains(fmt.Sprint(content[0]), "too large for this answer") || len(messagesOf(call)) != 4 ||
		reference(messagesOf(call)[1]) != nil || reference(messagesOf(call)[2]) == nil || reference(messagesOf(call)[3]) != nil {
		t.Errorf("the direct call: %d %.1000s", call.status, call.raw)
	}
	whole = a.readURL(t, "big", reference(messagesOf(call)[2]))
	if r := whole.Content[0].ToolResult; r == nil || len(r.Content) != 2 || r.Content[1].Image == nil || len(r.Content[1].Image.Source.Bytes) != 3_500_000 {
		t.Errorf("the recorded result, read through the URL: %+.200v", whole.Content[0])
	}
}

// TestPagesFitLambdasLimit: a session of messages that JSON escapes, each
// 1.2 MiB in the response event, and one that alone is 6 MiB there, is
// read and exported in pages within Lambda's 6 MB; the one too large for
// any page is a reference, and the rest come whole.
func TestPagesFitLambdasLimit(t *testing.T) {
	a := newAPI(t, nil)
	var msgs []agent.Message
	for i := range 3 {
		msgs = append(msgs, agent.UserText(fmt.Sprint(i)+escapes(300<<10)), agent.AssistantText(fmt.Sprint(i)))
	}
	msgs = append(msgs, agent.UserText("huge"+escapes(1536<<10)), agent.AssistantText("ok"))
	doc := document(msgs)
	if w := importDoc(t, a.Stack, "", as(doc, "pages"), ""); w.Code != 201 {
		t.Fatalf("import: %d %.300s", w.Code, w.Body)
	}
	for _, route := range []struct{ fixture string }{{"session-get.json"}, {"session-export.json"}} {
		got, pages := a.readPages(t, route.fixture, "pages")
		if diff := cmp.Diff(msgs, got); diff != "" {
			t.Errorf("%s read back (-imported +got):\n%.2000s", route.fixture, diff)
		}
		if pages != 3 { // the first six messages, the reference, the last
			t.Errorf("%s: %d pages", route.fixture, pages)
		}
	}
	// Served by plain HTTP, as the local run and the stream function's URL
	// serve it, no message is a reference.
	var got []agent.Message
	for cursor := ""; ; {
		w := a.Serve(httptest.NewRequestWithContext(t.Context(), http.MethodGet, "/sessions/pages?cursor="+cursor, nil))
		var page httpapi.SessionResponse
		strictDecode(t, w.Body.Bytes(), &page)
		got = append(got, page.Messages...)
		if cursor = page.NextCursor; cursor == "" {
			break
		}
	}
	if diff := cmp.Diff(msgs, got); diff != "" {
		t.Errorf("read by plain HTTP (-imported +got):\n%.2000s", diff)
	}
}

// TestSubAgentPagesFitLambdasLimit: a sub-agent's transcript is read in
// pages within Lambda's 6 MB, as the session's is; its message too large
// for any page is a reference that names the sub-agent, which the stream
// function's URL serves whole with &agent=.
func TestSubAgentPagesFitLambdasLimit(t *testing.T) {
	a := newAPI(t, twoAgents)
	var msgs []agent.Message
	for i := range 3 {
		msgs = append(msgs, agent.UserText(fmt.Sprint(i)+escapes(300<<10)), agent.AssistantText(fmt.Sprint(i)))
	}
	msgs = append(msgs, agent.UserText("huge"+escapes(1536<<10)), agent.AssistantText("ok"))
	doc := document(plain(2, "main"))
	doc.Agents = map[string]*httpapi.AgentDocument{"researcher": {MessageCount: len(msgs), Messages: msgs, State: map[string]json.RawMessage{}}}
	if w := importDoc(t, a.Stack, "", as(doc, "agent-pages"), ""); w.Code != 201 {
		t.Fatalf("import: %d %.300s", w.Code, w.Body)
	}
	var got []agent.Message
	refs, pages := 0, 0
	for cursor := ""; ; {
		pages++
		q := map[string]string{"agent": "researcher"}
		if cursor != "" {
			q["cursor"] = cursor
		}
		_, page := a.invokeRaw(t, request{route: "session-get.json", session: "agent-pages", query: q})
		if page.status != 200 || page.body["agent"] != "researcher" {
			t.Fatalf("%d %.300s", page.status, page.raw)
		}
		for _, m := range messagesOf(page) {
			if ref := reference(m); ref != nil {
				refs++
				if ref["agent"] != "researcher" {
					t.Errorf("a reference without its agent: %v", ref)
				}
				got = append(got, a.readURL(t, "agent-pages", ref))
				continue
			}
			var msg agent.Message
			raw, _ := json.Marshal(m)
			if err := json.Unmarshal(raw, &msg); err != nil {
				t.Fatal(err)
			}
			got = append(got, msg)
		}
		if cursor, _ = page.body["next_cursor"].(string); cursor == "" {
			break
		}
	}
	if diff := cmp.Diff(msgs, got); diff != "" || pages != 3 || refs != 1 {
		t.Errorf("%d pages, %d references; read back (-imported +got):\n%.2000s", pages, refs, diff)
	}
}

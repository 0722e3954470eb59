package functions_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/lambda-agent/lambda-agent/internal/testkit"
	"github.com/lambda-agent/lambda-agent/internal/testkit/conversetest"
	"github.com/lambda-agent/lambda-agent/internal/testkit/lambdatest"
	"github.com/lambda-agent/lambda-agent/internal/testkit/mcptest"
	"github.com/lambda-agent/lambda-agent/internal/testkit/ssmtest"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestRemoteToolsThroughTheBuiltFunction: the built chat function, pointed
// at stand-ins only by the SDK's endpoint variables, calls a Lambda tool
// and an MCP tool whose Authorization header it read from SSM at init.
func TestRemoteToolsThroughTheBuiltFunction(t *testing.T) {
	fn := lambdatest.NewServer()
	t.Cleanup(fn.Close)
	fn.Register("orders", func(context.Context, []byte) ([]byte, error) { return []byte(`{"status":"shipped"}`), nil })
	params := ssmtest.NewServer()
	t.Cleanup(params.Close)
	params.Put("/agent/token", "Bearer s3cret", true)
	srv := mcptest.NewServer(mcptest.RequireHeader("Authorization", "Bearer s3cret"))
	t.Cleanup(srv.Close)

	backends := testkit.StartBackends(t, testkit.BackendOptions{Model: func() *conversetest.Server {
		s := conversetest.NewServer()
		s.Enqueue(
			conversetest.ToolUse("u-order", "lookup_order", map[string]string{"order_id": "42"}).
				WithToolUse("u-echo", "tickets_echo", map[string]string{"text": "from MCP"}),
			conversetest.Text("Your order has shipped."),
		)
		return s
	}})
	d := deployOn(t, backends,
		"AWS_ENDPOINT_URL_LAMBDA="+fn.URL,
		"AWS_ENDPOINT_URL_SSM="+params.URL,
		`LAMBDA_TOOLS=[{"name":"lookup_order","function":"orders","description":"Look up an order."}]`,
		fmt.Sprintf(`MCP_SERVERS=[{"name":"tickets","url":%q,"secret_headers":{"Authorization":"/agent/token"}}]`, srv.URL),
	)
	resp, body := d.invoke(t, "chat", "chat-new.json")
	if resp.StatusCode != 200 || body["text"] != "Your order has shipped." {
		t.Fatalf("%d %v\nlogs:\n%s", resp.StatusCode, body, d.logs())
	}
	results := fmt.Sprint(body["messages"])
	for _, want := range []string{"shipped", "from MCP"} {
		if !strings.Contains(results, want) {
			t.Errorf("the turn's results lack %q: %s", want, results)
		}
	}
	// SSM is read at the init of the two functions that run tools, chat
	// and stream; the structured function offers the model no tools.
	for _, name := range []string{"stream", "structured"} {
		if _, err := d.fns[name].WaitReady(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	if fn.Calls("orders") != 1 || srv.Calls("echo") != 1 || params.Calls() != 2 {
		t.Errorf("calls: orders %d, echo %d, SSM %d; want 1, 1, 2", fn.Calls("orders"), srv.Calls("echo"), params.Calls())
	}
}

// TestAgentsFromSSMThroughTheBuiltFunction: the built functions, with
// AGENTS=ssm:/path and SSM reached only by AWS_ENDPOINT_URL_SSM, read their
// agents at init, the two that run tools only, and the chat function
// delegates to one.
func TestAgentsFromSSMThroughTheBuiltFunction(t *testing.T) {
	params := ssmtest.NewServer()
	t.Cleanup(params.Close)
	params.Put("/agent/agents/researcher", `{"name":"researcher","description":"Researches.","system_prompt":"You research.","tools":[]}`, true)
	backends := testkit.StartBackends(t, testkit.BackendOptions{Model: func() *conversetest.Server {
		s := conversetest.NewServer()
		s.Responder = func(req *conversetest.Request) conversetest.Reply {
			switch {
			case len(req.System) > 0 && req.System[0].Text == "You research.":
				return conversetest.Text("Forty-two.")
			case len(req.Messages) == 1:
				return conversetest.ToolUse("d1", "researcher", map[string]string{"task": "What is 6*7?"})
			}
			return conversetest.Text("The researcher says forty-two.")
		}
		return s
	}})
	d := deployOn(t, backends, "AWS_ENDPOINT_URL_SSM="+params.URL, "AGENTS=ssm:/agent/agents/")
	resp, body := d.invoke(t, "chat", "chat-new.json")
	if resp.StatusCode != 200 || body["text"] != "The researcher says forty-two." || body["agents"] == nil {
		t.Fatalf("%d %v\nlogs:\n%s", resp.StatusCode, body, d.logs())
	}
	for _, name := range []string{"stream", "structured"} {
		if _, err := d.fns[name].WaitReady(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	if params.Calls() != 2 {
		t.Errorf("%d reads of SSM, want 2: one at the init of chat and of stream", params.Calls())
	}
}

// hostileSchemaServer is an in-process MCP server, built with the official
// SDK, that lists a tool whose input schema refers to itself, one whose
// schema unfolds to 2^30 subschemas, and an ordinary one.
func hostileSchemaServer(t *testing.T) string {
	t.Helper()
	server := mcp.NewServer(&mcp.Implementation{Name: "hostile", Version: "1"}, nil)
	handler := func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "ran"}}}, nil
	}
	schema := func(raw string) map[string]any {
		var m map[string]any
		if err := json.Unmarshal([]byte(raw), &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	defs := make([]string, 30)
	for i := range defs {
		defs[i] = fmt.Sprintf(`"d%d":{"allOf":[{"$ref":"#/$defs/d%d"},{"$ref":"#/$defs/d%d"}]}`, i, i+1, i+1)
	}
	server.AddTool(&mcp.Tool{Name: "loop", InputSchema: schema(`{"type":"object","$ref":"#/$defs/loop","$defs":{"loop":{"$ref":"#/$defs/loop"}}}`)}, handler)
	server.AddTool(&mcp.Tool{Name: "doubling", InputSchema: schema(`{"type":"object","$ref":"#/$defs/d0","$defs":{` + strings.Join(defs, ",") + `,"d30":{"type":"object"}}}`)}, handler)
	server.AddTool(&mcp.Tool{Name: "fine", InputSchema: schema(`{"type":"object","properties":{"q":{"type":"string"}}}`)}, handler)
	hs := httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, &mcp.StreamableHTTPOptions{Stateless: true}))
	t.Cleanup(hs.Close)
	return hs.URL
}

// TestHostileToolSchemasThroughTheBuiltFunction (issue 24): the built chat
// function, given an MCP server whose tools' schemas are a $ref cycle and
// past MaxExpanded, survives a model's calls to them: it leaves them out
// when it lists them, with a warning, answers the turn, and stays far
// below its memory size. (Before, validating the cycle's input recursed
// until the stack limit, and the process died near 1 GB on every call.)
func TestHostileToolSchemasThroughTheBuiltFunction(t *testing.T) {
	url := hostileSchemaServer(t)
	backends := testkit.StartBackends(t, testkit.BackendOptions{Model: func() *conversetest.Server {
		s := conversetest.NewServer()
		s.Enqueue(
			conversetest.ToolUse("u-loop", "h_loop", map[string]any{}).
				WithToolUse("u-doubling", "h_doubling", map[string]any{}).
				WithToolUse("u-fine", "h_fine", map[string]string{"q": "x"}),
			conversetest.Text("Survived."),
		)
		return s
	}})
	d := deployOn(t, backends, fmt.Sprintf(`MCP_SERVERS=[{"name":"h","url":%q}]`, url))
	resp, body := d.invoke(t, "chat", "chat-new.json")
	if resp.StatusCode != 200 || body["text"] != "Survived." {
		t.Fatalf("%d %v\nlogs:\n%s", resp.StatusCode, body, d.logs())
	}
	results := fmt.Sprint(body["messages"])
	for _, want := range []string{`There is no tool named "h_loop"`, `There is no tool named "h_doubling"`, "ran"} {
		if !strings.Contains(results, want) {
			t.Errorf("the turn's results lack %q: %s", want, results)
		}
	}
	chat := d.fns["chat"]
	if exit := chat.Exit(); exit != nil {
		t.Fatalf("the chat function exited: %v", exit)
	}
	logs := chat.Logs()
	for _, want := range []string{`"tool":"loop"`, `applies itself to the same value again`, `"tool":"doubling"`, `"limit":"MaxExpanded"`} {
		if !strings.Contains(logs, want) {
			t.Errorf("the chat function's log lacks %s:\n%s", want, logs)
		}
	}
	peak, err := chat.PeakRSS()
	if errors.Is(err, errors.ErrUnsupported) {
		t.Skipf("peak RSS: %v", err)
	} else if err != nil {
		t.Fatal(err)
	}
	t.Logf("the chat function's peak RSS: %.1f MB", float64(peak)/1e6)
	if peak > 100<<20 {
		t.Errorf("the chat function's peak RSS is %.1f MB; its memory size is 512 MB", float64(peak)/1e6)
	}
}

package remote_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/google/go-cmp/cmp"
	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/remote"
	"github.com/lambda-agent/lambda-agent/internal/testkit"
	"github.com/lambda-agent/lambda-agent/internal/testkit/lambdatest"
	"github.com/lambda-agent/lambda-agent/internal/testkit/mcptest"
	"github.com/lambda-agent/lambda-agent/internal/testkit/ssmtest"
)

// orders is a function that looks up an order, fails on demand, and
// answers other JSON shapes.
func orders(_ context.Context, payload []byte) ([]byte, error) {
	var in struct {
		OrderID string `json:"order_id"`
	}
	if err := json.Unmarshal(payload, &in); err != nil {
		return nil, err
	}
	switch in.OrderID {
	case "missing":
		return nil, &lambdatest.FunctionError{Type: "OrderNotFound", Message: "no order missing"}
	case "text":
		return []byte(`"shipped"`), nil
	case "list":
		return []byte(`[1,2]`), nil
	}
	return json.Marshal(map[string]string{"order_id": in.OrderID, "status": "shipped"})
}

func TestLambdaTools(t *testing.T) {
	fn := lambdatest.NewServer()
	t.Cleanup(fn.Close)
	fn.Register("orders", orders)
	tools, err := remote.ParseLambdaTools(`[
		{"name":"lookup_order","function":"arn:aws:lambda:us-east-1:123456789012:function:orders","description":"Look up an order.",
		 "input_schema":{"type":"object","properties":{"order_id":{"type":"string"}},"required":["order_id"]}},
		{"name":"gone","function":"no-such-function","description":"A function that does not exist."}
	]`)
	if err != nil {
		t.Fatal(err)
	}
	ts := remote.LambdaTools(fn.Client(), tools, nil)
	lookup, gone := ts[0], ts[1]
	if s := lookup.Spec(); s.Name != "lookup_order" || !strings.Contains(string(s.InputSchema), "order_id") {
		t.Errorf("spec %+v", s)
	}
	call := func(tool agent.Tool, input string) ([]agent.ToolResultContent, error) {
		return tool.Run(t.Context(), &agent.ToolCall{ID: "u", Name: tool.Spec().Name, Input: json.RawMessage(input)})
	}
	for input, want := range map[string]string{
		`{"order_id":"42"}`:   `json {"order_id":"42","status":"shipped"}`,
		`{"order_id":"text"}`: `text shipped`,
		`{"order_id":"list"}`: `text [1,2]`,
	} {
		out, err := call(lookup, input)
		if err != nil || len(out) != 1 || fmt.Sprintf("json %s", out[0].JSON) != want && "text "+out[0].Text != want {
			t.Errorf("%s: %v %+v, want %s", input, err, out, want)
		}
	}
	if _, err := call(lookup, `{"order_id":"missing"}`); err == nil || err.Error() != "the function failed (OrderNotFound): no order missing" {
		t.Errorf("a function error: %v", err)
	}
	if _, err := call(gone, `{}`); err == nil || !strings.Contains(err.Error(), "no-such-function") || !strings.Contains(err.Error(), "ResourceNotFound") {
		t.Errorf("a function that does not exist: %v", err)
	}
	if n := fn.Calls("orders"); n != 4 {
		t.Errorf("%d invocations, want 4", n)
	}
}

func TestResolveSecrets(t *testing.T) {
	params := ssmtest.NewServer()
	t.Cleanup(params.Close)
	params.Put("/agent/token", "Bearer s3cret", true)
	servers, err := remote.ParseMCPServers(`[
		{"name":"a","url":"https://a.example.com/mcp","headers":{"X-Team":"t"},"secret_headers":{"Authorization":"/agent/token"}},
		{"name":"b","url":"https://b.example.com/mcp","secret_headers":{"Authorization":"/agent/token","X-Other":"/agent/token"}},
		{"name":"c","url":"https://c.example.com/mcp","secret_headers":{"Authorization":"/agent/missing"}},
		{"name":"d","url":"https://d.example.com/mcp"}
	]`)
	if err != nil {
		t.Fatal(err)
	}
	got, errs := remote.ResolveSecrets(t.Context(), params.Client(), servers)
	if len(got) != 3 || got[0].Headers["Authorization"] != "Bearer s3cret" || got[0].Headers["X-Team"] != "t" ||
		got[1].Headers["X-Other"] != "Bearer s3cret" || got[2].Name != "d" {
		t.Errorf("servers %+v", got)
	}
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "/agent/missing") || !strings.Contains(errs[0].Error(), "ParameterNotFound") {
		t.Errorf("errors %v", errs)
	}
	if servers[0].Headers["Authorization"] != "" {
		t.Error("ResolveSecrets changed the servers it was given")
	}
	// Each parameter is read once, however many headers name it; the
	// missing one once too.
	if n := params.Calls(); n != 2 {
		t.Errorf("%d reads of SSM, want 2", n)
	}
	for _, r := range params.Requests() {
		if !r.WithDecryption {
			t.Errorf("%v read without decryption", r.Names)
		}
	}
}

// TestRemoteToolsGetTheToolUseID: a Lambda function finds the tool use id
// in its client context, and an MCP server in the call's _meta, so that a
// call made again (after a crash, say) can be known for a repeat.
func TestRemoteToolsGetTheToolUseID(t *testing.T) {
	fn := lambdatest.NewServer()
	t.Cleanup(fn.Close)
	fn.Register("who", func(ctx context.Context, _ []byte) ([]byte, error) {
		lc, _ := lambdacontext.FromContext(ctx)
		return json.Marshal(lc.ClientContext.Custom[remote.ToolUseIDKey])
	})
	who := remote.LambdaTools(fn.Client(), []remote.LambdaTool{{Name: "who", Function: "who", Description: "d", InputSchema: json.RawMessage(`{"type":"object"}`)}}, nil)[0]
	out, err := who.Run(t.Context(), &agent.ToolCall{ID: "tooluse_42", Name: "who", Input: json.RawMessage(`{}`)})
	if err != nil || out[0].Text != "tooluse_42" {
		t.Errorf("the function got %v %+v", err, out)
	}

	srv := mcptest.NewServer()
	t.Cleanup(srv.Close)
	set, _, _ := newSet(t, remote.MCPServer{URL: srv.URL}, remote.MCPOptions{})
	if _, err := run(t, t.Context(), byName(t, set.Tools(t.Context()), "srv_echo"), `{"text":"x"}`); err != nil {
		t.Fatal(err)
	}
	if got := srv.LastMeta()[remote.ToolUseIDKey]; got != "u1" {
		t.Errorf("the MCP server got _meta %v", srv.LastMeta())
	}
}

// TestLambdaToolSchemaPastTheBudget (issue 24): a Lambda tool whose input
// schema unfolds past MaxExpanded, or refers outside itself, is left out at
// init, with a warning that names it, why and the limit; the others bring
// their schemas compiled.
func TestLambdaToolSchemaPastTheBudget(t *testing.T) {
	defs := make([]string, 30)
	for i := range defs {
		defs[i] = fmt.Sprintf(`"d%d":{"allOf":[{"$ref":"#/$defs/d%d"},{"$ref":"#/$defs/d%d"}]}`, i, i+1, i+1)
	}
	var logs testkit.Buffer
	tools := remote.LambdaTools(nil, []remote.LambdaTool{
		{Name: "doubling", Function: "f", Description: "d", InputSchema: json.RawMessage(`{"type":"object","$ref":"#/$defs/d0","$defs":{` + strings.Join(defs, ",") + `,"d30":{}}}`)},
		{Name: "remote", Function: "f", Description: "d", InputSchema: json.RawMessage(`{"type":"object","properties":{"a":{"$ref":"https://example.com/a.json"}}}`)},
		{Name: "fine", Function: "f", Description: "d", InputSchema: json.RawMessage(`{"type":"object"}`)},
	}, slog.New(slog.NewJSONHandler(&logs, nil)))
	if diff := cmp.Diff([]string{"fine"}, names(tools)); diff != "" {
		t.Errorf("tools (-want +got):\n%s", diff)
	}
	if c, ok := tools[0].(agent.CompiledTool); !ok || c.CompiledSchema() == nil {
		t.Error("the tool does not bring its schema compiled")
	}
	for _, want := range []string{
		`"msg":"Lambda tool left out","tool":"doubling","function":"f","reason":"its input schema cannot be used: invalid JSON Schema: the schema expands to more than 10000 subschemas`,
		`(limit: MaxExpanded)","limit":"MaxExpanded"}`,
		`"tool":"remote","function":"f","reason":"its input schema cannot be used: invalid JSON Schema: the $ref \"https://example.com/a.json\" at /properties/a is a remote reference`,
	} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("the warnings do not say %s:\n%s", want, logs.String())
		}
	}
}

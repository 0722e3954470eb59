package functions_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/lambda-agent/lambda-agent/internal/conversetest"
	"github.com/lambda-agent/lambda-agent/internal/lambdalocal"
	"github.com/lambda-agent/lambda-agent/internal/mcptest"
	"github.com/lambda-agent/lambda-agent/internal/ssmlocal"
	"github.com/lambda-agent/lambda-agent/internal/testkit"
)

// TestRemoteToolsThroughTheBuiltFunction: the built chat function, pointed
// at stand-ins only by the SDK's endpoint variables, calls a Lambda tool
// and an MCP tool whose Authorization header it read from SSM at init.
func TestRemoteToolsThroughTheBuiltFunction(t *testing.T) {
	fn := lambdalocal.NewServer()
	t.Cleanup(fn.Close)
	fn.Register("orders", func(context.Context, []byte) ([]byte, error) { return []byte(`{"status":"shipped"}`), nil })
	params := ssmlocal.NewServer()
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

package remote_test

import (
	"strings"
	"testing"

	"github.com/lambda-agent/lambda-agent/internal/remote"
)

func TestParseMCPServers(t *testing.T) {
	servers, err := remote.ParseMCPServers(`[
		{"name":"orders","url":"https://mcp.example.com/mcp","headers":{"X-Team":"support"},
		 "secret_headers":{"Authorization":"/agent/orders-token"},"allow":["lookup_order"]},
		{"name":"local","url":"http://127.0.0.1:8765/mcp","prefix":""}
	]`)
	if err != nil {
		t.Fatal(err)
	}
	if len(servers) != 2 || servers[0].ToolPrefix() != "orders_" || servers[1].ToolPrefix() != "" ||
		servers[0].SecretHeaders["Authorization"] != "/agent/orders-token" {
		t.Errorf("servers %+v", servers)
	}
	for _, tt := range []struct{ name, value, says string }{
		{"not a list", `{"name":"a"}`, "JSON list"},
		{"unknown field", `[{"name":"a","url":"https://x","token":"t"}]`, `unknown field "token"`},
		{"bad name", `[{"name":"a b","url":"https://x"}]`, "name must match"},
		{"same name", `[{"name":"a","url":"https://x"},{"name":"a","url":"https://y"}]`, "a second server"},
		{"plain http", `[{"name":"a","url":"http://mcp.example.com/mcp"}]`, "use https"},
		{"relative", `[{"name":"a","url":"/mcp"}]`, "absolute"},
		{"header", `[{"name":"a","url":"https://x","headers":{"Bad Header":"v"}}]`, "not a valid HTTP header"},
		{"header twice", `[{"name":"a","url":"https://x","headers":{"A":"1"},"secret_headers":{"A":"/p"}}]`, "both"},
		{"prefix", `[{"name":"a","url":"https://x","prefix":"a.b_"}]`, "prefix"},
		{"trailing", `[] []`, "after the JSON list"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := remote.ParseMCPServers(tt.value)
			if err == nil || !strings.Contains(err.Error(), tt.says) {
				t.Errorf("error %v, want one that says %q", err, tt.says)
			}
		})
	}
}

func TestParseLambdaTools(t *testing.T) {
	tools, err := remote.ParseLambdaTools(`[
		{"name":"refund","function":"arn:aws:lambda:us-east-1:123456789012:function:refund:live","description":"Refund an order.",
		 "input_schema":{"type":"object","properties":{"order_id":{"type":"string"}},"required":["order_id"]}},
		{"name":"ping","function":"ping","description":"Ping."}
	]`)
	if err != nil {
		t.Fatal(err)
	}
	if len(tools) != 2 || string(tools[1].InputSchema) != `{"type":"object"}` {
		t.Errorf("tools %+v", tools)
	}
	_, err = remote.ParseLambdaTools(`[{"name":"bad.name","function":"","description":" "},{"name":"ok","function":"f","description":"d"},{"name":"ok","function":"f","description":"d"}]`)
	for _, want := range []string{"name must match", "function is required", "description is required", "a second tool"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not say %q", err, want)
		}
	}
}

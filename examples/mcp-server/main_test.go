package main

import (
	"net/http/httptest"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func connect(t *testing.T) *mcp.ClientSession {
	t.Helper()
	srv := httptest.NewServer(handler())
	t.Cleanup(srv.Close)
	c := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "v0"}, nil)
	cs, err := c.Connect(t.Context(), &mcp.StreamableClientTransport{
		Endpoint: srv.URL + "/mcp", DisableStandaloneSSE: true,
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

func TestListTools(t *testing.T) {
	cs := connect(t)
	res, err := cs.ListTools(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range res.Tools {
		names = append(names, tool.Name)
		if tool.Description == "" || tool.InputSchema == nil {
			t.Errorf("%s: description %q, inputSchema %v; want both", tool.Name, tool.Description, tool.InputSchema)
		}
	}
	slices.Sort(names)
	if diff := cmp.Diff([]string{"lookup_order", "word_count"}, names); diff != "" {
		t.Errorf("tool names (-want +got):\n%s", diff)
	}
}

func TestCallTool(t *testing.T) {
	tests := []struct {
		name           string
		tool           string
		args           map[string]any
		wantIsError    bool
		wantStructured any
		wantText       string
	}{
		{
			name: "word_count", tool: "word_count", args: map[string]any{"text": "Hello, big wide world"},
			wantStructured: map[string]any{"words": float64(4), "characters": float64(21)},
			wantText:       `{"characters":21,"words":4}`, // the SDK sorts the keys
		},
		{
			name: "word_count unicode", tool: "word_count", args: map[string]any{"text": "  héllo   wörld  "},
			wantStructured: map[string]any{"words": float64(2), "characters": float64(17)},
			wantText:       `{"characters":17,"words":2}`,
		},
		{
			name: "lookup_order", tool: "lookup_order", args: map[string]any{"order_id": "a-1001"},
			wantStructured: map[string]any{"order_id": "A-1001", "status": "shipped", "eta": "2026-03-14"},
			wantText:       `{"eta":"2026-03-14","order_id":"A-1001","status":"shipped"}`,
		},
		{
			name: "lookup_order unknown", tool: "lookup_order", args: map[string]any{"order_id": "Z-9"},
			wantIsError: true, wantText: `no order "Z-9"`,
		},
		{
			name: "lookup_order missing id", tool: "lookup_order", args: map[string]any{},
			wantIsError: true,
			wantText:    `validating "arguments": validating root: required: missing properties: ["order_id"]`,
		},
	}
	cs := connect(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: tt.tool, Arguments: tt.args})
			if err != nil {
				t.Fatal(err)
			}
			if got.IsError != tt.wantIsError {
				t.Errorf("IsError = %v, want %v", got.IsError, tt.wantIsError)
			}
			if diff := cmp.Diff(tt.wantStructured, got.StructuredContent); diff != "" {
				t.Errorf("structuredContent (-want +got):\n%s", diff)
			}
			if len(got.Content) != 1 {
				t.Fatalf("got %d content blocks, want 1", len(got.Content))
			}
			text, ok := got.Content[0].(*mcp.TextContent)
			if !ok || text.Text != tt.wantText {
				t.Errorf("content = %#v, want text %q", got.Content[0], tt.wantText)
			}
		})
	}
}

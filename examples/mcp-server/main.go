// Command mcp-server is a small MCP server to try the agent's MCP tools
// with. It serves two tools over streamable HTTP at /mcp, built with the
// official Go SDK (github.com/modelcontextprotocol/go-sdk):
//
//   - word_count {text} → {"words":N,"characters":M}
//   - lookup_order {order_id} → the status of a canned order, such as A-1001
//
// Run it, then point the local run at it:
//
//	go run ./examples/mcp-server                      # http://127.0.0.1:8765/mcp
//	go run ./cmd/local -mcp http://127.0.0.1:8765/mcp
//
// It is stateless (no sessions to keep), like a server that runs on Lambda.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

type wordCountIn struct {
	Text string `json:"text" jsonschema:"the text to count the words of"`
}

type wordCountOut struct {
	Words      int `json:"words"`
	Characters int `json:"characters"`
}

type orderIn struct {
	OrderID string `json:"order_id" jsonschema:"the order id, such as A-1001"`
}

type order struct {
	OrderID string `json:"order_id"`
	Status  string `json:"status"`
	ETA     string `json:"eta,omitempty"`
}

// orders stands in for a real order system.
var orders = map[string]order{
	"A-1001": {OrderID: "A-1001", Status: "shipped", ETA: "2026-03-14"},
	"A-1002": {OrderID: "A-1002", Status: "processing"},
	"A-1003": {OrderID: "A-1003", Status: "delivered"},
}

func wordCount(_ context.Context, _ *mcp.CallToolRequest, in wordCountIn) (*mcp.CallToolResult, wordCountOut, error) {
	// The SDK sends the output as structuredContent, and as JSON text.
	return nil, wordCountOut{Words: len(strings.Fields(in.Text)), Characters: utf8.RuneCountInString(in.Text)}, nil
}

func lookupOrder(_ context.Context, _ *mcp.CallToolRequest, in orderIn) (*mcp.CallToolResult, order, error) {
	o, ok := orders[strings.ToUpper(strings.TrimSpace(in.OrderID))]
	if !ok {
		// A Go error from a typed tool reaches the model as a tool failure
		// (isError), so it can tell the user or try another id.
		return nil, order{}, fmt.Errorf("no order %q", in.OrderID)
	}
	return nil, o, nil
}

// newServer returns the MCP server with its tools.
func newServer() *mcp.Server {
	s := mcp.NewServer(&mcp.Implementation{Name: "example-mcp-server", Version: "v1.0.0"}, nil)
	mcp.AddTool(s, &mcp.Tool{Name: "word_count", Description: "Counts the words and characters of a text."}, wordCount)
	mcp.AddTool(s, &mcp.Tool{Name: "lookup_order", Description: "Looks up the status of an order by its id."}, lookupOrder)
	return s
}

// handler serves MCP at /mcp.
func handler() http.Handler {
	s := newServer()
	mux := http.NewServeMux()
	mux.Handle("/mcp", mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s },
		&mcp.StreamableHTTPOptions{Stateless: true}))
	return mux
}

func main() {
	addr := flag.String("addr", "127.0.0.1:8765", "address to listen on")
	flag.Parse()
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("MCP server listening on http://%s/mcp\n", ln.Addr())
	srv := &http.Server{Handler: handler(), ReadHeaderTimeout: 10 * time.Second}
	log.Fatal(srv.Serve(ln))
}

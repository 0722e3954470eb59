package mcptest

import (
	"context"
	"net/http"
	"net/http/httptest"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Answers starts a stateless server, built with the official SDK, whose
// tools are the keys of answers: each takes any object and answers with
// its content, however hostile (mislabelled images, nothing at all, tens of
// megabytes), for tests of what a client makes of a server's answers. Its
// endpoint is the returned server's URL; call Close when done.
func Answers(answers map[string][]mcp.Content) *httptest.Server {
	m := mcp.NewServer(&mcp.Implementation{Name: "answers", Version: "v1.0.0"}, nil)
	for name, content := range answers {
		m.AddTool(&mcp.Tool{Name: name, InputSchema: map[string]any{"type": "object"}},
			func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
				return &mcp.CallToolResult{Content: content}, nil
			})
	}
	return httptest.NewServer(mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return m }, &mcp.StreamableHTTPOptions{Stateless: true}))
}

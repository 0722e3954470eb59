package mcptest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"strconv"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Tool names, as the server lists them.
const (
	ToolAdd          = "add"
	ToolEcho         = "echo"
	ToolFail         = "fail"
	ToolExplode      = "explode"
	ToolRPCError     = "rpc_error"
	ToolSlow         = "slow"
	ToolImage        = "image"
	ToolCreateTicket = "create_ticket"
	ToolDotted       = "read.file"   // Bedrock refuses the dot
	ToolUnderscored  = "read_file"   // what ToolDotted becomes if a dot is mapped to "_"
	ToolSpaced       = "get weather" // Bedrock refuses the space

	// LongToolName is 70 characters long: the SDK accepts up to 128,
	// Bedrock only 64.
	LongToolName = "my_tool_name_that_is_much_too_long_for_bedrock_which_stops_at_64_chars"
)

// Texts the tools answer with.
const (
	FailMessage     = "the tool failed on purpose"
	ExplodeMessage  = "explode: the handler returned a Go error"
	RPCErrorMessage = "rpc_error: the raw handler returned a Go error"
	ImageCaption    = "a 4x4 test pattern"
)

// ToolNames returns the names of every tool the server lists, in the order
// they are registered.
func ToolNames() []string {
	return []string{
		ToolAdd, ToolEcho, ToolFail, ToolExplode, ToolRPCError, ToolSlow,
		ToolImage, ToolCreateTicket,
		ToolDotted, ToolUnderscored, ToolSpaced, LongToolName,
	}
}

// CreateTicketSchema is the input schema of create_ticket, as the server
// lists it: nested objects, an array, enums, bounds and required fields, so
// a client can check that schemas pass through intact.
func CreateTicketSchema() map[string]any {
	return map[string]any{
		"type": "object",
		"properties": map[string]any{
			"title": map[string]any{
				"type": "string", "description": "One-line summary.", "minLength": float64(1),
			},
			"priority": map[string]any{
				"type": "string", "enum": []any{"low", "medium", "high"},
			},
			"labels": map[string]any{
				"type": "array", "items": map[string]any{"type": "string"},
			},
			"customer": map[string]any{
				"type": "object",
				"properties": map[string]any{
					"id":   map[string]any{"type": "string"},
					"tier": map[string]any{"type": "string", "enum": []any{"free", "pro"}},
				},
				"required":             []any{"id"},
				"additionalProperties": false,
			},
			"estimate_hours": map[string]any{"type": "number", "minimum": float64(0)},
		},
		"required":             []any{"title", "priority", "customer"},
		"additionalProperties": false,
	}
}

// pngBytes is a small valid PNG, made once at init.
var pngBytes = makePNG()

// PNG returns the bytes of the image the image tool answers with (a copy).
func PNG() []byte { return bytes.Clone(pngBytes) }

func makePNG() []byte {
	img := image.NewRGBA(image.Rect(0, 0, 4, 4))
	for x := range 4 {
		for y := range 4 {
			img.Set(x, y, color.RGBA{R: uint8(60 * x), G: uint8(60 * y), B: 200, A: 255})
		}
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		panic(fmt.Sprintf("mcptest: encode png: %v", err))
	}
	return buf.Bytes()
}

func text(s string) []mcp.Content { return []mcp.Content{&mcp.TextContent{Text: s}} }

type addIn struct {
	A float64 `json:"a" jsonschema:"the first addend"`
	B float64 `json:"b" jsonschema:"the second addend"`
}

type addOut struct {
	Sum float64 `json:"sum"`
}

type echoIn struct {
	Text string `json:"text" jsonschema:"the text to echo back"`
}

type slowIn struct {
	Seconds float64 `json:"seconds" jsonschema:"how long to wait, in seconds"`
}

// addTools registers the tools on m. Slow calls end early when closed is
// closed; slowCancelled is called when one ends because its context was
// done.
func addTools(m *mcp.Server, closed <-chan struct{}, slowCancelled func()) {
	mcp.AddTool(m, &mcp.Tool{Name: ToolAdd, Description: "Adds two numbers."},
		func(_ context.Context, _ *mcp.CallToolRequest, in addIn) (*mcp.CallToolResult, addOut, error) {
			sum := in.A + in.B
			// Set Content, or the SDK would fill it with the JSON of addOut.
			res := &mcp.CallToolResult{Content: text(strconv.FormatFloat(sum, 'f', -1, 64))}
			return res, addOut{Sum: sum}, nil
		})

	mcp.AddTool(m, &mcp.Tool{Name: ToolEcho, Description: "Answers with the text it is given."},
		func(_ context.Context, _ *mcp.CallToolRequest, in echoIn) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: text(in.Text)}, nil, nil
		})

	mcp.AddTool(m, &mcp.Tool{Name: ToolFail, Description: "Always fails, as a tool failure (isError)."},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{IsError: true, Content: text(FailMessage)}, nil, nil
		})

	mcp.AddTool(m, &mcp.Tool{Name: ToolExplode, Description: "Its handler returns a Go error."},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return nil, nil, errors.New(ExplodeMessage)
		})

	// A raw handler: the SDK sends its error as a JSON-RPC error, not as
	// isError. No description, which Bedrock would refuse as "".
	m.AddTool(&mcp.Tool{Name: ToolRPCError, InputSchema: map[string]any{"type": "object"}},
		func(context.Context, *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
			return nil, errors.New(RPCErrorMessage)
		})

	mcp.AddTool(m, &mcp.Tool{Name: ToolSlow, Description: "Waits the given number of seconds."},
		func(ctx context.Context, _ *mcp.CallToolRequest, in slowIn) (*mcp.CallToolResult, any, error) {
			t := time.NewTimer(time.Duration(in.Seconds * float64(time.Second)))
			defer t.Stop()
			select {
			case <-t.C:
				return &mcp.CallToolResult{Content: text(fmt.Sprintf("slept %gs", in.Seconds))}, nil, nil
			case <-ctx.Done():
				slowCancelled()
				return nil, nil, ctx.Err()
			case <-closed:
				return nil, nil, errors.New("slow: the server is closing")
			}
		})

	mcp.AddTool(m, &mcp.Tool{Name: ToolImage, Description: "Answers with a small PNG and a caption."},
		func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
			return &mcp.CallToolResult{Content: []mcp.Content{
				// Data holds the raw bytes: the SDK base64-encodes them on the wire.
				&mcp.ImageContent{Data: PNG(), MIMEType: "image/png"},
				&mcp.TextContent{Text: ImageCaption},
			}}, nil, nil
		})

	mcp.AddTool(m, &mcp.Tool{
		Name:        ToolCreateTicket,
		Description: "Creates a support ticket.",
		InputSchema: CreateTicketSchema(),
	}, func(_ context.Context, _ *mcp.CallToolRequest, in map[string]any) (*mcp.CallToolResult, any, error) {
		// With Out = any the SDK leaves StructuredContent to the handler.
		return &mcp.CallToolResult{
			Content:           text(fmt.Sprintf("created TCK-1: %v", in["title"])),
			StructuredContent: map[string]any{"id": "TCK-1", "arguments": in},
		}, nil, nil
	})

	for _, name := range []string{ToolDotted, ToolUnderscored, ToolSpaced, LongToolName} {
		mcp.AddTool(m, &mcp.Tool{Name: name, Description: "Answers with its own name."},
			func(context.Context, *mcp.CallToolRequest, struct{}) (*mcp.CallToolResult, any, error) {
				return &mcp.CallToolResult{Content: text("called " + name)}, nil, nil
			})
	}
}

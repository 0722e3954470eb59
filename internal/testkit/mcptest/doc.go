// Package mcptest is a real MCP server for tests: the official Go SDK's
// mcp.Server behind mcp.NewStreamableHTTPHandler, on a loopback
// httptest server, with a fixed set of tools that cover what an MCP client
// must handle — answers, structured content, tool failures, Go errors,
// protocol errors, slow calls, images, names Bedrock refuses and a rich
// input schema.
//
// A new protocol is tested against a real server built with its official
// SDK, over HTTP, so the client under test meets the SDK's real wire
// behaviour (sessions, SSE or JSON responses, status codes) rather than a
// hand-written imitation of it.
//
// Like conversetest, it does not import package testing: it panics if it
// cannot listen, and its methods are safe for concurrent use.
//
// # Usage
//
//	srv := mcptest.NewServer()                 // stateless, like a Lambda
//	defer srv.Close()
//	// point the client under test at srv.URL ("http://127.0.0.1:PORT/mcp")
//	srv.Calls(mcptest.ToolAdd)                 // tools/call requests for "add"
//	srv.ListCalls()                            // tools/list requests
//	srv.LastHeader("Authorization")            // a header of the last request
//	srv.SetDown(true)                          // 503 to everything, until false
//
// Options: [Stateful] keeps sessions, so an unknown Mcp-Session-Id is
// answered 404 ([Server.DropSessions] forgets them all); [NoSessionID]
// hands out no Mcp-Session-Id at all; [JSONResponse] answers
// application/json instead of an SSE stream; [PageSize] pages tools/list;
// [RequireHeader] answers 401 to requests without a header value.
//
// Counters: [Server.Calls], [Server.ListCalls], [Server.Requests] (by
// JSON-RPC method), [Server.HTTPRequests] (by HTTP method),
// [Server.Sessions] and [Server.SlowCancelled].
//
// # Tools
//
// [ToolNames] lists them all. Inputs are JSON objects; outputs are
// CallToolResult fields.
//
//	add           {a, b number}     text "5", structuredContent {"sum":5}
//	echo          {text string}     text: the input text
//	fail          {}                isError, text mcptest.FailMessage
//	explode       {}                the typed handler returns a Go error; the
//	                                SDK answers isError with the error's text
//	                                mcptest.ExplodeMessage (not a protocol error)
//	rpc_error     {}                a raw handler returns a Go error; the SDK
//	                                answers a JSON-RPC error (code 0, message
//	                                mcptest.RPCErrorMessage); it has no description
//	slow          {seconds number}  waits, honouring ctx, then text
//	                                "slept <seconds>s"
//	image         {}                an image/png ImageContent (mcptest.PNG()) and the
//	                                text mcptest.ImageCaption
//	create_ticket rich schema       text "created TCK-1: <title>",
//	                                structuredContent {"id":"TCK-1",
//	                                "arguments":<the arguments received>}
//	read.file, read_file, "get weather", mcptest.LongToolName
//	              {}                text "called <name>"
//
// The last four names test name mapping: Bedrock accepts only
// ^[a-zA-Z0-9_-]{1,64}$, so "read.file" (a dot), "get weather" (a space)
// and LongToolName (70 characters) must be renamed by the client, and
// "read.file" collides with "read_file" once a dot becomes an underscore.
// The SDK registers all of them: it allows dots and names up to 128
// characters, and for other characters (the space) it only logs an error
// to the server's logger, then serves the tool anyway.
//
// Arguments are validated by the SDK against each tool's input schema; a
// call with invalid arguments is answered isError with a text starting
// "validating \"arguments\"", and a call to an unknown tool with a JSON-RPC
// error (code -32602, "unknown tool").
package mcptest

// Package remote gives the agent tools that run elsewhere, configured
// rather than written in Go: the tools of MCP servers, reached over
// streamable HTTP with the official Go SDK, and Lambda functions, called
// with a synchronous Invoke.
//
// MCP tools are an agent.ToolSet: a server's tool list is fetched when the
// function starts, in the background, and cached for the container's life,
// listed again after a TTL. A server that cannot be reached offers the
// tools it listed last, whose calls then fail as error results for the
// model, or none, and is asked again after a short wait. Nothing about a
// remote server fails the function's init or a turn. Lambda tools are
// ordinary agent.Tools, described in the configuration.
package remote

// Package remote gives the agent tools that run elsewhere, configured
// rather than written in Go: the tools of MCP servers, reached over
// streamable HTTP with the official Go SDK; Lambda functions, called
// with a synchronous Invoke; and remote agents, asked over the
// Agent2Agent protocol (A2A v1.0, JSON-RPC) with its official Go SDK.
//
// MCP tools are an agent.ToolSet: a server's tool list is fetched when the
// function starts, in the background, and cached for the container's life,
// listed again after a TTL. A server that cannot be reached offers the
// tools it listed last, whose calls then fail as error results for the
// model, or none, and is asked again after a short wait. Nothing about a
// remote server fails the function's init or a turn. Lambda tools are
// ordinary agent.Tools, described in the configuration.
//
// A2A agents (A2A_AGENTS, ParseA2AAgents) are an agent.ToolSet too, of a
// tool per agent that takes a message and returns the agent's answer, or
// its question when it needs more input; A2AClient.Send and SendStreaming
// go on with a remote task or conversation by its ids. An agent's card is
// fetched when first needed, or at Start, and cached like an MCP tool
// list. The card is the remote side's to write, and the SDK calls the URL
// it names, so it is not trusted: the agent is left out, with a warning,
// unless its card offers a JSON-RPC interface on the origin of the
// configured card URL. Every connection is checked on the address
// dialled, after DNS: never a private, link-local (the instance metadata
// service), unspecified or multicast address, nor the Lambda Runtime API,
// and loopback only for an agent configured on a literal loopback
// address. Every request is kept to the card URL's origin, redirects
// included, before its headers, secret ones (ResolveA2ASecrets) or a SigV4
// signature (auth aws_iam, for Lambda function URLs) are added; answers
// are bounded, and what a card says of its agent is cleaned and cut before
// the model reads it. Nothing is fetched or built unless A2A_AGENTS is
// set.
package remote

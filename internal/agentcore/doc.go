// Package agentcore holds what lambda-agent's use of Bedrock AgentCore
// Memory needs to agree on everywhere: how an owner and a session id
// become AgentCore's actorId and sessionId. The mirror that writes events,
// the recall that reads records under an actor's namespace, and the
// deletes that forget an owner must all compute the same ids, so they come
// from here and nowhere else.
//
// Our owners are up to 1 KB of any UTF-8, colons included (such as
// iam:arn:aws:iam::123456789012:role/agent), and our session ids up to 128
// characters of [A-Za-z0-9][A-Za-z0-9._:-]*; AgentCore's actorId is 1 to
// 255 characters of [a-zA-Z0-9][a-zA-Z0-9-_/]* and its sessionId 1 to 100
// of [a-zA-Z0-9][a-zA-Z0-9-_]*. Neither fits as it is, so each is encoded
// as a short prefix and the lower-case, unpadded base32 of its SHA-256:
// always valid, of fixed length, and the same in every process. The
// encoding is one-way; its README.md shows an operator how to compute
// it to find a session's events.
//
// The package imports no AWS SDK.
package agentcore

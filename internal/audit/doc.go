// Package audit holds the audit record of a session: for every model call
// of a turn, the exact request the model was given (the system prompt, the
// messages of the window as sent, the cache points, the tool specs, the
// inference and guardrail settings) and what it answered (the message, the
// stop reason, the usage), or the error it failed with.
//
// A Log collects the records of one turn. The session service puts one in
// the turn's context (With); the model (internal/agent/bedrock) adds a
// Record to it after each call, from the request it sent over the wire.
// Nothing is written during the turn: when the turn ends, the service
// scrubs what a guardrail redacted from the records (Redact) and stores
// them (internal/ddbhistory), so that a record never holds what the
// session itself no longer keeps, and a failed write costs the turn
// nothing. The package imports no AWS SDK.
package audit

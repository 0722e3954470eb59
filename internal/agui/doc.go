// Package agui serves the Agent-User Interaction protocol (AG-UI 1.0, as
// @ag-ui/core 1.0.0 defines it) over the session service: a thin adapter,
// which maps a RunAgentInput onto a chat turn of internal/turn (Chat) and
// the turn's events onto AG-UI's (Stream), and owns nothing else. The
// thread is the session; its history lives on the server, and the ids of
// its messages are the server's (MessageID) or, for the client's own
// messages, the client's, stored with them.
//
// The HTTP route, the caller's identity, the limits on the body and the
// status of a refusal are internal/httpapi's, as for every other route.
package agui

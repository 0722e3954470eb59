// Package a2a serves the agent over the Agent2Agent protocol (A2A v1.0):
// a thin adapter from A2A's JSON-RPC methods to the turn service, as
// internal/agui is for AG-UI. Handler implements the official Go SDK's
// a2asrv.RequestHandler, which the SDK's JSON-RPC handler serves; Card
// describes the agent at /.well-known/agent-card.json.
//
// A2A's contexts are sessions, owned and checked like every session, and
// its tasks are turns: a task id is an opaque, reversible encoding of its
// session, the index of its turn's first message, and the id of the
// message that started it. Nothing is stored apart from the turn's own
// commit: a task's state is derived from the committed session, by any
// invocation, so that it can never disagree with it. A turn that pauses
// for a person is TASK_STATE_INPUT_REQUIRED, with the interrupts as a data
// part; the next message on that task answers them, and CancelTask denies
// them instead.
//
// A message's messageId is its idempotency key, in A2A's own namespace
// ("a2a:"): a message sent again, blocking or streaming, replays the
// answer of the first and calls the model once.
package a2a

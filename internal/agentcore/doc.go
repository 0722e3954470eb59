// Package agentcore is Bedrock AgentCore Memory as lambda-agent's
// long-term memory: the alternative to internal/memory for teams that
// have standardised on AgentCore (docs/memory.md, "AgentCore Memory").
//
// DynamoDB stays the session's source of truth. AgentCore gets a mirror of
// each committed turn, from the sessions table's stream, and its
// strategies extract long-term records from it, with no code of ours:
//
//   - [Memory] recalls an owner's records into each of their turns (a
//     turn.Provider), with one RetrieveMemoryRecords call, and serves the
//     memory routes: it lists and deletes the owner's records, and marks a
//     forget-all.
//   - [Mirror] is the memory function's handler: it writes each commit's
//     messages as CreateEvents, idempotent by a clientToken derived from
//     the commit, and deletes what the API lets it delete when a session
//     is deleted, rewound or re-created, and when its owner forgets all.
//
// Owners that have memory are those internal/memory gives it to: one
// person each. An owner and a session id become AgentCore's actorId and
// sessionId through [ActorID] and [SessionID], the only encoding used for
// events, namespaces and deletes; docs/memory.md shows an operator how to
// compute it.
package agentcore

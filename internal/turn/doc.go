// Package turn is the use case at the centre of lambda-agent: one turn of a
// conversation, run on a stored session and committed back, whatever the
// transport. A turn goes
//
//	Load → (Replay) → Begin (hold the idempotency key) → agent → Commit
//	                                                          ↘ Release
//
// A request that carries an idempotency key whose turn was committed gets
// that turn's answer back instead (a replay). Otherwise the key is held while
// the agent runs, so that a retry cannot run the turn twice; the commit
// stores the turn, its answer for later replays and the key's record in one
// atomic write, and a turn that fails releases the key and stores nothing.
//
// Chat, structured and streamed turns are all calls of one Service; a
// streamed turn differs only in its Sink. The package knows no HTTP: its
// input is a typed request, its output an Outcome or an error that callers
// tell apart with errors.Is and errors.As (this package's sentinels, and the
// agent's and the store's). internal/httpapi maps them to status codes.
//
// A capability that changes how a turn starts, pauses, resumes or ends
// belongs here, tested with the hand-written fakes of Store and Agent in
// this package's tests.
package turn

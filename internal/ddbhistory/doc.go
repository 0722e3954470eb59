// Package ddbhistory stores agent sessions in one DynamoDB table. A turn loads
// only the active window of a session and commits atomically, so the cost of a
// turn does not grow with the length of the conversation, and two turns racing
// on one session can never interleave or lose messages.
//
// # Layout
//
// Every item of a session shares one partition key, which scopes the session
// to its owner: "s#" + owner + "#" + session id. Session ids cannot contain
// '#', so two owners can never produce the same key. Sort keys:
//
//	meta                 the session item: version, message count, agent
//	                     state, conversation-manager state, timestamps; or,
//	                     while a delete runs, a tombstone
//	m#0000000042         message 42, written once; only a rewinding commit
//	                     rewrites it
//	m#0000000042#001     the second part of message 42, when it is larger than
//	                     one item holds
//	r#<key>              the response of an idempotent turn
//
// A session id is unique across owners. The first commit of a session writes
// a claim, partition "id#" + session id, sort key "claim", holding the owner,
// on the condition that no other owner holds a live claim; another owner's
// first commit under that id then fails with ErrNotFound, so an id in use
// never reveals that it exists. The claim is written to live twice the TTL
// and renewed by a commit when less than one TTL is left, so it outlives the
// session item, and a session's commits write it at most once per TTL.
//
// An idempotency key belongs to its owner, not to a session: its record has a
// partition of its own, "i#" + a hash of the owner and the key, sort key
// "key", so the key cannot serve a second request on any session. The
// response itself is the session's r#<key> item, so that a delete removes it
// with the rest.
//
// Messages are JSON compressed with DEFLATE, in a binary attribute. A message
// too large for one item (400 KB) is split into parts and reassembled on load,
// so big tool results, images and documents are kept whole.
//
// Every item carries the TTL attribute expires_at (Unix seconds; 0 means it
// never expires). Messages expire a configured time after they are written;
// the session item's expiry moves forward with every commit. TTL deletion lags,
// so reads treat an expired item as absent.
//
// # Idempotency holds
//
// A hold is an explicit value rather than state on the session, so that what
// becomes of the key is plain at every call. Begin writes the key's record as
// a hold and returns it as a *Hold, which belongs to the session it was taken
// for. Turn.Hold carries it into Commit: the turn's transaction replaces the
// hold with the record of the request it answered (a fingerprint, the session
// and its incarnation) and writes the response, and fails if another request
// has taken the key since the hold expired. Release(ctx, hold) frees it after
// a turn that failed, so that a retry need not wait; it does nothing once the
// turn has committed. A hold that is neither committed nor released, because
// its process died, expires HoldMargin after the deadline of the invocation
// that took it, when that invocation can no longer commit.
//
// # Commits
//
// A turn that fits one TransactWriteItems (100 items, 4 MB) is committed in
// one: the new messages, the idempotency record and response when the turn
// carries a hold, the claim when due, and the session item under an
// optimistic version check. A larger turn
// is written in parts that readers still see all or none of: the session item
// is marked with a writer token (under the version check), the messages that
// do not fit the last transaction are written in transactions that each check
// the mark, and the last transaction writes the session item, whose message
// count makes them visible. Messages past the count are never read. A commit
// that overtakes the writer replaces the session item, and with it the mark,
// so the writer can write nothing more; a writer that fails removes what it
// wrote, where it is still past the count, and the next commit overwrites
// what a crash leaves. For a new session the mark is a session item without a
// creation time, which readers take for no session.
//
// # Rewinds
//
// A turn with Turn.Rewind replaces the session's messages from an index on:
// a rewind, or a regenerated or edited turn. Its messages are written from
// that index, over the discarded ones, and the session item's count drops or
// grows to match, all under the usual version check. Writes that replace
// messages readers see go in the last transaction, with the session item;
// only writes past the old count go before it. The session item records the
// version and index of its last rewind ("rewound", "rewound_to"), and from
// the first rewind on every message item the session version its commit
// made ("written"): a read that finds a message written after the session
// item it read, or one at or past the rewind's index written before it,
// overlapped a commit, and is made again. A replay of a turn that a rewind discarded finds its messages
// gone or rewritten, and answers nothing. A rewind that shortens the session
// then deletes, best effort and under its version, the discarded items past
// the new count, which a load's first query would otherwise read through.
//
// # Staged sessions
//
// A new session too large for one request, a long import, is staged: Stage
// writes its messages part by part under a reservation of its session item
// (a writer token and a count of the messages staged, no creation time, so
// that readers see no session), each transaction moving the count on under
// the condition that it is where the transaction starts. The Commit whose
// Turn.Staging names the staging writes the last messages, the claim and
// the session item, conditioned on the staging as it was read, and so makes
// the whole session visible at once.
//
// # Deletes
//
// Delete first turns the session item into a tombstone: its data removed, its
// version moved on, a deletion time set. No turn can commit past it, and
// readers see no session, while the claim keeps the id with its owner. The
// rest of the session is then deleted in transactions that each check the
// tombstone, so that a delete that lost track of time can never remove what
// a later session under the id wrote; last, the tombstone and the claim go
// together. A crash at any step leaves a tombstone, and a Delete that finds
// one finishes the job.
//
// # Costs
//
// Load is one strongly consistent Query that reads the session item and the
// newest messages in descending key order, up to a window hint; a second Query
// follows only when the window is longer than the hint or past the 1 MB page
// size. Commit is one TransactWriteItems, unless the turn does not fit one.
// Begin is one PutItem and Release one DeleteItem, on the key's own
// partition.
package ddbhistory

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
//	                     state, conversation-manager state, timestamps
//	m#0000000042         message 42, written once and never rewritten
//	m#0000000042#001     the second part of message 42, when it is larger than
//	                     one item holds
//	i#<key>              the stored response of an idempotent turn
//
// A session id is unique across owners. The first commit of a session writes
// a claim, partition "id#" + session id, sort key "claim", holding the owner,
// on the condition that no other owner holds a live claim; another owner's
// first commit under that id then fails with ErrNotFound, so an id in use
// never reveals that it exists. The claim is written to live twice the TTL
// and renewed by a commit when less than one TTL is left, so it outlives the
// session item, and a session's commits write it at most once per TTL.
//
// Messages are JSON compressed with DEFLATE, in a binary attribute. A message
// too large for one item (400 KB) is split into parts and reassembled on load,
// so big tool results, images and documents are kept whole; only a turn larger
// than one transaction (100 items, 4 MB) is refused, with ErrTooLarge, before
// anything is written.
//
// Every item carries the TTL attribute expires_at (Unix seconds; 0 means it
// never expires). Messages expire a configured time after they are written;
// the session item's expiry moves forward with every commit. TTL deletion lags,
// so reads treat an expired item as absent.
//
// # Costs
//
// Load is one strongly consistent Query that reads the session item and the
// newest messages in descending key order, up to a window hint; a second Query
// follows only when the window is longer than the hint or past the 1 MB page
// size. Commit is one TransactWriteItems: the new messages, the idempotency
// record and the session item, under an optimistic version check.
package ddbhistory

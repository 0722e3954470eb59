// Package memory is the agent's long-term memory: what it learns of a
// person in one session and recalls in the next. It keeps records per
// owner in the sessions table, learns them from the table's stream after
// each commit (Extractor, the memory function's), and recalls them into
// each turn as a context provider (Provider) and a tool (SearchTool).
//
// # Whose memory
//
// Only an owner that names one person has memory (Config.Has): a JWT
// subject. The owner of unauthenticated sessions, "anonymous", never has
// any, except in the local run, whose one user is one person; an IAM
// principal has memory only with Config.IAMOwners, since every caller
// signing as that principal would share it.
//
// # Layout
//
// An owner's memory is one partition of the sessions table, "mem#" +
// owner, which no session's key can be ("s#", "id#" and "i#" begin
// those). Sort keys:
//
//	f          the forget marker: the time of the owner's last forget-all,
//	           and nothing else
//	r#<id>     a record: its kind, text, source (session and message
//	           index), the time of the commit it was learned from, and a
//	           version for conditional writes
//	x#<commit> that the commit, a session's incarnation and version, was
//	           learned from: a retried stream record writes nothing twice
//
// No memory item has both "owner" and "created_at", so none is in the
// owner index or GET /sessions. A recall reads the marker and the records
// in one Query page: at most MaxRecords records of at most MaxTextBytes,
// which with the longest owner fit DynamoDB's 1 MB page (see
// TestRecordsFitOnePage).
//
// # Guarantees
//
//   - A request's owner, never a model's input, chooses the partition: a
//     turn reads and writes its own owner's memory and no other's.
//   - Consolidation writes a commit's changes in one transaction, under
//     the version of every record it changes, the forget marker as it was
//     read, and the commit's own x# item: two extractions racing for one
//     owner lose nothing, and a retried one writes nothing twice.
//   - Forget writes the marker first, then deletes every record learned
//     from a commit made before it. An extraction of such a commit that is
//     still in flight fails its condition on the marker, and one that reads
//     the marker drops the commit: nothing forgotten comes back.
package memory

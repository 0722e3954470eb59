// Package offline is a model for the local run without an AWS account: the
// strict Converse stand-in (internal/testkit/conversetest), answering with canned
// replies that show the machinery at work.
//
// It echoes and says how many messages it saw. It calls the calculator for
// arithmetic, remember and recall for "remember that my X is Y" and "what is
// my X", and current_time when asked the time. It calls any tool it is
// offered when told to with "/tool NAME {JSON input}", so that a new tool can
// be tried without Bedrock. After a tool call it reports what the tools
// returned, or says plainly that the person denied the call. It writes
// summaries that only count lines, and answers structured requests with an
// object built from their schema, not one extracted from the prompt.
//
// It keeps long-term memory too (internal/memory): asked to extract, it
// learns facts ("my X is Y"), preferences ("I like X") and what to forget
// ("forget my X") from the person's words; and it answers "what
// is my X" and "what do I like" from the records memory recalled into the
// turn, as "From memory: ...". The context the application adds to a
// turn is never taken for the person's words.
package offline

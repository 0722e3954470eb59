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
package offline

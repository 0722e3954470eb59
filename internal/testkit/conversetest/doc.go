// Package conversetest is a strict stand-in for the Amazon Bedrock Runtime
// Converse API: an HTTP server that speaks Bedrock's wire protocol
// (restJson1), so the real bedrockruntime SDK client talks to it through
// BaseEndpoint and every request goes through the SDK's real serializer.
//
// It serves unit tests of the agent engine, Lambda handler tests, benchmarks
// and the offline local-run binary, so it does not import package testing,
// answers in microseconds, and is safe for concurrent use.
//
// # Usage
//
//	srv := conversetest.NewServer()
//	defer srv.Close()
//	srv.Enqueue(
//		conversetest.ToolUse("t1", "get_weather", map[string]any{"city": "Oslo"}),
//		conversetest.Text("It is sunny in Oslo."),
//	)
//	client := srv.Client() // *bedrockruntime.Client, retries off
//	// … run the code under test with client …
//	if v := srv.Violations(); len(v) > 0 { /* the code broke a Bedrock rule */ }
//
// # Wire protocol
//
// POST /model/{modelId}/converse takes Bedrock's JSON body, which is decoded
// into [Request]. A success is HTTP 200 with {"output":{"message":…},
// "stopReason":…, "usage":…, "metrics":…}. An error is an HTTP status, the
// error code in the X-Amzn-ErrorType header and {"message":…} in the body,
// from which the SDK builds its typed errors (*types.ThrottlingException,
// *types.ValidationException, …).
//
// POST /model/{modelId}/converse-stream takes the same body, is checked and
// scripted the same way, and answers errors found before the first byte the
// same way. A success is HTTP 200 with a vnd.amazon.eventstream body, which
// the SDK decodes: messageStart; for each content block a contentBlockStart
// (toolUse only), contentBlockDelta events carrying pieces of the text, tool
// input or reasoning ([Reply.WithChunking]), and a contentBlockStop; then
// messageStop with the stop reason and metadata with usage. Each event is
// flushed on its own. [Reply.WithStreamError] ends the stream early with an
// exception event, as Bedrock does when the model fails mid-answer.
//
// Anything else is answered 404 UnknownOperationException.
//
// # Strict validation
//
// Every request is checked against the message rules Bedrock enforces, and
// the first violation is answered with 400 ValidationException whose
// message names the element, such as
// "messages[3]: roles must alternate: two consecutive user messages". The
// violation is also recorded ([Server.Violations]). Scripting cannot bypass
// this: an invalid request never consumes a scripted reply. The checks,
// which [Validate] applies too:
//
//   - modelId is not empty; messages is not empty.
//   - Roles are user or assistant, the first and the last message are user
//     messages (the agent never prefills), and roles alternate.
//   - No message has empty content. Every content block, system block and
//     toolResult content block has exactly one union member, and it is one
//     Bedrock knows. Text is never blank (empty or whitespace only).
//   - Images and documents appear only in user messages (images and
//     documents inside a toolResult are fine); toolUse and reasoningContent
//     only in assistant messages; toolResult only in user messages.
//   - Images are png, jpeg, gif or webp; documents are pdf, csv, doc, docx,
//     xls, xlsx, html, txt or md, have a valid name (alphanumerics, single
//     whitespace, hyphens, parentheses, square brackets) and a text block in
//     the same message. Bytes are not empty; an image is at most 3.75 MiB and
//     a document at most 4.5 MiB; a request has at most 20 images and 5
//     documents.
//   - Bytes are what their format says, judged by their first bytes as
//     models do: an image's signature is its format's (png, jpeg, gif,
//     webp); a pdf holds "%PDF-" in its first 1024 bytes, a docx or xlsx is
//     a ZIP archive, a doc or xls an OLE2 compound file, and a csv, html,
//     txt or md document is UTF-8 without NUL bytes. The messages are
//     Bedrock's, such as "The image was specified using the image/png media
//     type, but the image appears to be a image/jpeg image". An image
//     damaged past its first bytes passes; [UnreadableImage] scripts the
//     refusal Bedrock sends for it.
//   - Every toolUse of an assistant message is answered by a toolResult with
//     the same id in the next message, with no extra and no duplicate
//     toolResults; a toolResult must answer a toolUse of the assistant
//     message right before it. toolUse ids are unique in the request and
//     match ^[a-zA-Z0-9_-]{1,64}$, toolUse input is a JSON object, a
//     toolResult status is "", "success" or "error", and a toolResult has
//     content.
//   - toolConfig is present when messages contain toolUse or toolResult
//     blocks; it has tools, each with one member; tool names match
//     ^[a-zA-Z0-9_-]{1,64}$ and are unique; every toolSpec has an
//     inputSchema.json object; toolChoice has one member, and a specific
//     tool choice names a declared tool.
//   - inferenceConfig.maxTokens is at least 1; temperature and topP are in
//     [0, 1]. A guardrailConfig has an identifier and a version.
//   - Cache points stand among the system blocks, in a message's content
//     or as an entry of toolConfig.tools (not in toolResult content). A
//     cachePoint has type "default", an optional ttl of "5m" or "1h", and
//     no other member. A request holds at most [MaxCachePoints], counted
//     across tools, system and messages, and is refused beyond that with
//     Bedrock's words ("A maximum of 4 blocks with cache_control may be
//     provided. Found 5."). A ttl of 1h never follows a 5m point in the
//     order tools, system, messages; a cache point never follows a
//     reasoningContent block. Cache points are not content: a message, or
//     a tools list, made only of them is refused. A cache point first in a
//     message, or several in a row, is accepted, as nothing says Bedrock
//     refuses them.
//
// # Context overflow
//
// With [Server.MaxInputBytes] set, a valid request whose
// [EstimateInputBytes] exceeds it gets the ValidationException Bedrock sends
// for a prompt that is too long ([OverflowMessage]), so tests can run into
// the context window naturally. [Overflow] and [OverflowStop] script the two
// ways Bedrock reports overflow.
//
// # Prompt cache
//
// [Server.EnableCache] turns on a simulated prompt cache, so that prompt
// caching can be measured and tested without AWS: entries keyed by the
// exact prefix before each cache point (and the model ID), a minimum
// prefix size, a TTL renewed by each hit, and a lookup that also tries the
// [CacheLookbackBlocks] block boundaries before each point, as Bedrock
// does. The usage of both operations then reports cacheReadInputTokens and
// cacheWriteInputTokens, with inputTokens counting only the uncached rest.
// [Server.CacheStats] sums what it did. The cache is off by default.
//
// # Guardrails
//
// [GuardrailInput] scripts what Bedrock answers when the request's guardrail
// blocks its input, and [GuardrailOutput] when it blocks the model's answer:
// stop reason guardrail_intervened and, as the answer, the guardrail's
// blocked message, given by the test. When the request's guardrailConfig
// asked for the trace ("enabled" or "enabled_full"), the answer carries it
// as Bedrock does: in the response's trace member for Converse, and in the
// metadata event for ConverseStream. It is a GuardrailTraceAssessment whose
// inputAssessment, keyed by the request's guardrail identifier, holds the
// assessment of a blocked input ([BlockedAssessment], a content filter that
// detected and blocked violence, unless [Reply.WithAssessment] gives
// another), or an empty assessment when the output was blocked, whose
// assessment outputAssessments then holds in a list. Its modelOutput and
// actionReason members are not sent. Without a trace asked for, the answer
// has none. An intervention scripted for a request that names no guardrail
// is a mistake in the test, answered with a 500 whose message says so.
//
// # Scripting and recording
//
// Valid requests take replies from a queue ([Server.Enqueue]) in arrival
// order, and fall back to [Server.Responder] when it is empty. Replies are
// built with [Text], [ToolUse], the error helpers ([Throttle],
// [ModelNotReady], [Unavailable], [InternalError], [ModelTimeout],
// [Overflow], [Error], …) and refined with the With methods, including a
// Delay that ends early when the client disconnects. Token usage is
// estimated at four bytes per token unless a reply fixes it (a fixed usage
// wins over the simulated cache too). Every request, valid or not, is
// recorded ([Server.Requests]).
package conversetest

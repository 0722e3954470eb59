// Package agent runs one turn of a conversation with a model: the loop of
// model calls and tool runs that answers one user message.
//
// The agent is stateless. A turn starts from a Conversation (the active
// window of a stored session, the conversation manager's state and the agent
// state) and returns a Result that says what to persist: the messages the turn
// added, the new window state and the new agent state. Nothing is persisted
// when a turn fails, so a failure leaves the session as it was.
//
// The package owns its message model (Message and ContentBlock), which
// survives encoding/json, and the Model and StreamingModel interfaces with
// the failures a model reports (ModelError and its ErrorKind). It imports no
// AWS SDK package. The model on Amazon Bedrock's Converse API lives in
// internal/agent/bedrock, the one place that converts to and from Bedrock's
// types, decodes its streams and classifies its errors. What this package
// knows of Bedrock are the rules every history must keep (Repair) and the
// limits on a user's input (ValidateInput) and on schemas
// (CheckSchemaDocument), which need no SDK.
//
// What a turn guarantees:
//   - the loop ends: at most Config.MaxCycles model calls, after which the
//     turn ends with StopMaxCycles;
//   - every history it leaves behind is one Bedrock accepts: it starts with a
//     user message, roles alternate, and every tool use is answered;
//   - tool failures (an unknown tool, invalid input, an error, a panic, a
//     timeout) go back to the model as error results, and the turn goes on;
//   - every tool result, whoever made it, is bounded (Config.MaxToolResultBytes
//     and MaxToolResultMediaBytes) and passes ValidateToolResult, the rule of
//     every stored history, or goes back to the model as an error result
//     that says why: what the model sees is what the session stores;
//   - retryable model failures are retried with backoff and full jitter, but
//     never past the context's deadline less Config.Reserve;
//   - a context overflow makes the ConversationManager reduce the window, and
//     the call is made again.
//
// Code that embeds the agent watches and steers a turn through Hooks: before
// and after the invocation, each model call and each tool call, and when a
// message is added. A tool hook can cancel a call, replace its result, or
// interrupt it. The application registers one, which logs failed tool runs.
//
// A turn can pause for a person: a tool use of a tool that requires
// approval (RequireApproval), one a hook interrupts, or a question of the
// AskUser tool ends the turn with StopInterrupt and Result.Pending. Answer
// and Continue resume it in a later invocation, from the stored
// conversation alone.
package agent

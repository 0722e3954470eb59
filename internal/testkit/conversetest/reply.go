package conversetest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"time"
)

// Error codes Bedrock Runtime sends in the X-Amzn-ErrorType header. The SDK
// turns each into the types.<Code> error of the same name.
const (
	CodeThrottling         = "ThrottlingException"
	CodeModelNotReady      = "ModelNotReadyException"
	CodeServiceUnavailable = "ServiceUnavailableException"
	CodeInternalServer     = "InternalServerException"
	CodeModelTimeout       = "ModelTimeoutException"
	CodeValidation         = "ValidationException"
	CodeAccessDenied       = "AccessDeniedException"
	CodeResourceNotFound   = "ResourceNotFoundException"
	// CodeUnknownOperation answers paths that are not a known operation. The
	// SDK has no type for it and returns a *smithy.GenericAPIError.
	CodeUnknownOperation = "UnknownOperationException"
)

// Stop reasons used by the reply helpers. Any other Bedrock stop reason can
// be set with [Reply.WithStop].
const (
	StopEndTurn                    = "end_turn"
	StopToolUse                    = "tool_use"
	StopMaxTokens                  = "max_tokens"
	StopModelContextWindowExceeded = "model_context_window_exceeded"
)

// OverflowMessage is the ValidationException message Bedrock sends when the
// input does not fit the model's context window.
const OverflowMessage = "Input is too long for requested model."

// APIError is an error answer in Bedrock's wire format: an HTTP status, the
// X-Amzn-ErrorType header and a {"message": …} body.
type APIError struct {
	Status  int
	Code    string
	Message string
}

// Error implements error.
func (e *APIError) Error() string {
	return e.Code + ": " + e.Message
}

// Usage is the token usage of a reply, in Bedrock's shape: the cache's
// counts are sent only when they are not zero.
type Usage struct {
	InputTokens           int `json:"inputTokens"`
	OutputTokens          int `json:"outputTokens"`
	TotalTokens           int `json:"totalTokens"`
	CacheReadInputTokens  int `json:"cacheReadInputTokens,omitempty"`
	CacheWriteInputTokens int `json:"cacheWriteInputTokens,omitempty"`
}

// Reply is one scripted answer: an assistant message or an error.
//
// Build replies with the helpers ([Text], [ToolUse], [Throttle], …) and
// refine them with the With methods. The With methods return a modified copy
// and never share the Content slice with their receiver, so one base reply
// can be refined in several ways.
type Reply struct {
	// Content is the assistant message content of a successful reply.
	Content []ContentBlock
	// StopReason is sent as is. If empty, it is "tool_use" when Content has
	// a toolUse block and "end_turn" otherwise.
	StopReason string
	// Usage, if set, replaces the estimated usage (see [EstimateInputBytes]).
	Usage *Usage
	// Delay is how long the server waits before answering. The wait ends
	// early, without an answer, when the client goes away or the server is
	// closed.
	Delay time.Duration
	// Err, if set, is answered instead of a message.
	Err *APIError

	// ChunkBytes and ChunkDelay shape a ConverseStream answer: pieces of at
	// most ChunkBytes of text or tool input (0 means DefaultChunkBytes),
	// each event after a pause of ChunkDelay. See [Reply.WithChunking].
	ChunkBytes int
	ChunkDelay time.Duration
	// StreamErr, if set, cuts a ConverseStream answer short with an
	// exception. See [Reply.WithStreamError].
	StreamErr *StreamError
	// Guardrail, if set, makes the reply a guardrail's intervention, whose
	// trace the answer carries when the request asked for it. See
	// [GuardrailInput].
	Guardrail *Intervention
}

// Text returns an end_turn reply with one text block.
//
// Text("") sends an empty text block, which real models occasionally return
// (typically right after a tool result). Sending such a block back is a
// violation, so it is a good test for the code under test.
func Text(s string) Reply {
	return Reply{StopReason: StopEndTurn}.WithText(s)
}

// ToolUse returns a tool_use reply with one toolUse block. Add more tool
// calls with [Reply.WithToolUse].
//
// input is encoded with encoding/json; ToolUse panics if that fails, as
// regexp.MustCompile does, because a script that cannot be encoded is a
// programming error in the test.
func ToolUse(id, name string, input any) Reply {
	return Reply{}.WithToolUse(id, name, input)
}

// WithText returns r with a text block appended.
func (r Reply) WithText(s string) Reply {
	block := ContentBlock{Text: s}
	if s == "" {
		// The Text field cannot carry an empty text member; Other can.
		block = ContentBlock{Other: map[string]json.RawMessage{"text": json.RawMessage(`""`)}}
	}
	r.Content = append(slices.Clip(r.Content), block)
	return r
}

// WithToolUse returns r with a toolUse block appended and its stop reason
// set to tool_use, so Text("let me look").WithToolUse(…) is a text+toolUse
// turn. It panics if input cannot be encoded (see [ToolUse]).
func (r Reply) WithToolUse(id, name string, input any) Reply {
	raw, err := json.Marshal(input)
	if err != nil {
		panic(fmt.Sprintf("conversetest: encode input of tool %s: %v", name, err))
	}
	r.Content = append(slices.Clip(r.Content), ContentBlock{
		ToolUse: &ToolUseBlock{ToolUseID: id, Name: name, Input: raw},
	})
	r.StopReason = StopToolUse
	return r
}

// WithReasoning returns r with a reasoningContent block put first, where
// models place their reasoning.
func (r Reply) WithReasoning(text, signature string) Reply {
	block := ContentBlock{ReasoningContent: &ReasoningBlock{
		ReasoningText: &ReasoningText{Text: text, Signature: signature},
	}}
	r.Content = append([]ContentBlock{block}, r.Content...)
	return r
}

// WithStop returns r with the given stop reason.
func (r Reply) WithStop(reason string) Reply {
	r.StopReason = reason
	return r
}

// WithCacheUsage returns r with fixed token usage that read and wrote the
// prompt cache; the total counts them all.
func (r Reply) WithCacheUsage(in, read, write, out int) Reply {
	r.Usage = &Usage{InputTokens: in, OutputTokens: out, CacheReadInputTokens: read, CacheWriteInputTokens: write, TotalTokens: in + read + write + out}
	return r
}

// WithUsage returns r with fixed token usage; the total is in+out.
func (r Reply) WithUsage(in, out int) Reply {
	r.Usage = &Usage{InputTokens: in, OutputTokens: out, TotalTokens: in + out}
	return r
}

// WithDelay returns r with the given Delay.
func (r Reply) WithDelay(d time.Duration) Reply {
	r.Delay = d
	return r
}

// stopReason returns the stop reason to send.
func (r Reply) stopReason() string {
	if r.StopReason != "" {
		return r.StopReason
	}
	for _, b := range r.Content {
		if b.ToolUse != nil {
			return StopToolUse
		}
	}
	return StopEndTurn
}

// Error returns a reply that answers with the given HTTP status, error code
// and message.
func Error(status int, code, msg string) Reply {
	return Reply{Err: &APIError{Status: status, Code: code, Message: msg}}
}

// Throttle returns a 429 ThrottlingException reply.
func Throttle() Reply {
	return Error(http.StatusTooManyRequests, CodeThrottling, "Too many requests, please wait before trying again.")
}

// ModelNotReady returns a 429 ModelNotReadyException reply.
func ModelNotReady() Reply {
	return Error(http.StatusTooManyRequests, CodeModelNotReady, "Model is not ready to serve inference requests. Try again later.")
}

// Unavailable returns a 503 ServiceUnavailableException reply.
func Unavailable() Reply {
	return Error(http.StatusServiceUnavailable, CodeServiceUnavailable, "Bedrock is unable to process your request.")
}

// InternalError returns a 500 InternalServerException reply.
func InternalError() Reply {
	return Error(http.StatusInternalServerError, CodeInternalServer, "The system encountered an unexpected error during processing. Try your request again.")
}

// ModelTimeout returns a 408 ModelTimeoutException reply.
func ModelTimeout() Reply {
	return Error(http.StatusRequestTimeout, CodeModelTimeout, "Model has timed out in processing the request. Try your request again.")
}

// AccessDenied returns a 403 AccessDeniedException reply.
func AccessDenied() Reply {
	return Error(http.StatusForbidden, CodeAccessDenied, "You don't have access to the model with the specified model ID.")
}

// ResourceNotFound returns a 404 ResourceNotFoundException reply.
func ResourceNotFound() Reply {
	return Error(http.StatusNotFound, CodeResourceNotFound, "Could not resolve the foundation model from the provided model identifier.")
}

// Overflow returns the 400 ValidationException that Bedrock sends when the
// input is longer than the context window ([OverflowMessage]).
func Overflow() Reply {
	return Error(http.StatusBadRequest, CodeValidation, OverflowMessage)
}

// UnreadableImage returns the 400 ValidationException Bedrock sends when the
// model cannot decode an image whose first bytes are those of its format,
// so that the server's own check let it through.
func UnreadableImage() Reply {
	return Error(http.StatusBadRequest, CodeValidation, "The model returned the following errors: "+unreadableImageMessage)
}

// OverflowStop returns a successful reply with no content and stop reason
// model_context_window_exceeded, the other way Bedrock reports overflow.
func OverflowStop() Reply {
	return Reply{Content: []ContentBlock{}, StopReason: StopModelContextWindowExceeded}
}

// EchoResponder is the default [Server.Responder]: an end_turn text reply
// saying how many messages the request had, so a test can tell turns apart
// without scripting them.
func EchoResponder(req *Request) Reply {
	return Text(fmt.Sprintf("seen %d messages", len(req.Messages)))
}

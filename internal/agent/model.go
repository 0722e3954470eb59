package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Model is a chat model that answers one request with one assistant message.
//
// Implementations return a *ModelError for failures the service reported, so
// the agent can decide what to retry, and the context's error when the context
// ended. They must be safe for concurrent use.
type Model interface {
	Converse(ctx context.Context, req *ModelRequest) (*ModelResponse, error)
}

// ModelRequest is one call to a model.
type ModelRequest struct {
	System   string
	Messages []Message
	Tools    []ToolSpec
	// ToolChoice is ignored when Tools is empty.
	ToolChoice ToolChoice
	// CacheSystem and CacheAfter ask for prompt cache points: after the
	// tools and system prompt, and after the messages at these indexes,
	// in ascending order. A model places those its cache takes, and none
	// when it has no cache.
	CacheSystem bool
	CacheAfter  []int
}

// ToolChoice says whether the model must use a tool. The zero value lets the
// model decide.
type ToolChoice struct {
	// Any makes the model use at least one tool.
	Any bool
	// Tool, when set, makes the model use this tool.
	Tool string
}

// ToolSpec describes a tool to the model.
type ToolSpec struct {
	// Name matches [a-zA-Z0-9_-]{1,64}.
	Name        string
	Description string
	// InputSchema is a JSON Schema whose root is an object.
	InputSchema json.RawMessage
}

// ModelResponse is a model's answer.
type ModelResponse struct {
	Message    Message
	StopReason StopReason
	Usage      Usage
	// Latency is the service-side latency when the service reports one.
	Latency time.Duration
	// Guardrail says what the model's guardrail blocked, as its trace
	// tells; nil when the response carries no guardrail trace.
	Guardrail *GuardrailTrace
}

// GuardrailTrace is what a guardrail's trace says it blocked in one model
// call. With StopGuardrailIntervened, it tells an input the guardrail
// refused, which must not be sent again, from an answer it replaced.
type GuardrailTrace struct {
	// Input says that a policy of the guardrail blocked the request's
	// input: the model never saw it.
	Input bool
	// Output says that a policy blocked the model's answer; the response's
	// message is then the guardrail's, not the model's.
	Output bool
}

// StopReason says why a model stopped, or why a turn ended.
type StopReason string

// Bedrock's stop reasons, and StopMaxCycles, which is the agent's own.
const (
	StopEndTurn             StopReason = "end_turn"
	StopToolUse             StopReason = "tool_use"
	StopMaxTokens           StopReason = "max_tokens"
	StopSequence            StopReason = "stop_sequence"
	StopGuardrailIntervened StopReason = "guardrail_intervened"
	StopContentFiltered     StopReason = "content_filtered"
	StopMalformedOutput     StopReason = "malformed_model_output"
	StopMalformedToolUse    StopReason = "malformed_tool_use"
	StopContextExceeded     StopReason = "model_context_window_exceeded"
	// StopMaxCycles ends a turn that reached Config.MaxCycles model calls.
	StopMaxCycles StopReason = "max_cycles"
)

// Usage counts tokens.
type Usage struct {
	// InputTokens counts the input the model read at full price: with
	// prompt caching, the input past the cached prefix.
	InputTokens  int `json:"input_tokens"`
	OutputTokens int `json:"output_tokens"`
	TotalTokens  int `json:"total_tokens"`
	// CacheReadInputTokens counts the input read from the prompt cache,
	// and CacheWriteInputTokens the input written to it.
	CacheReadInputTokens  int `json:"cache_read_input_tokens"`
	CacheWriteInputTokens int `json:"cache_write_input_tokens"`
}

func (u *Usage) add(v Usage) {
	u.InputTokens += v.InputTokens
	u.OutputTokens += v.OutputTokens
	u.TotalTokens += v.TotalTokens
	u.CacheReadInputTokens += v.CacheReadInputTokens
	u.CacheWriteInputTokens += v.CacheWriteInputTokens
}

// ErrorKind classifies a failed model call.
type ErrorKind int

// The kinds of model failure. Throttled and Unavailable are retried; the
// others are not.
const (
	// KindOther is a failure that fits no other kind, such as a malformed response.
	KindOther ErrorKind = iota
	// KindThrottled is ThrottlingException: the account's quota is exhausted.
	KindThrottled
	// KindUnavailable is a transient failure: ModelNotReadyException,
	// ServiceUnavailableException, InternalServerException,
	// ModelTimeoutException, ModelStreamErrorException, another 5xx, or a
	// failure to reach the service.
	KindUnavailable
	// KindOverflow is a request larger than the model's context window.
	KindOverflow
	// KindInvalid is a request the service rejected as invalid.
	KindInvalid
	// KindToolChoiceUnsupported is a request that forced a tool on a model
	// that cannot be forced.
	KindToolChoiceUnsupported
	// KindDenied is AccessDeniedException.
	KindDenied
	// KindNotFound is a model id the service does not know, or cannot call
	// as it is given: ResourceNotFoundException, or a ValidationException
	// about the model identifier.
	KindNotFound
	// KindInvalidContent is a request the service rejected because of an
	// image or a document in it: bytes that are not the declared format, a
	// file the model cannot read, or media the model does not take. A turn
	// whose own input carries media reports it as the caller's *InputError;
	// otherwise it stays a model failure.
	KindInvalidContent
)

var kindNames = [...]string{"other", "throttled", "unavailable", "overflow", "invalid", "tool choice unsupported", "denied", "not found", "invalid content"}

func (k ErrorKind) String() string {
	if int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("ErrorKind(%d)", int(k))
}

// Retryable reports whether a failure of this kind may succeed if tried again.
func (k ErrorKind) Retryable() bool { return k == KindThrottled || k == KindUnavailable }

// ModelError is a model call that failed.
type ModelError struct {
	Kind ErrorKind
	// Model is the id of the model called, when known.
	Model string
	// Code is the service's error code, such as "ThrottlingException".
	Code string
	// Status is the HTTP status, when there was a response.
	Status  int
	Message string
	Err     error
}

func (e *ModelError) Error() string {
	if e.Code != "" {
		return fmt.Sprintf("model %s (%s): %s", e.Kind, e.Code, e.Message)
	}
	return fmt.Sprintf("model %s: %s", e.Kind, e.Message)
}

func (e *ModelError) Unwrap() error { return e.Err }

// Errors a turn can end with. Callers test for them with errors.Is; a
// *ModelError, *StructuredError or *InputError carries the details.
var (
	// ErrContextOverflow means the conversation does not fit the model's
	// context window and the conversation manager cannot reduce it further.
	ErrContextOverflow = errors.New("context window overflow: nothing more can be reduced")
	// ErrDeadline means the turn ran out of time: what is left before the
	// context's deadline is the reserve kept for committing or answering.
	ErrDeadline = errors.New("not enough time left before the deadline")
	// ErrCannotReduce is returned by ConversationManager.Reduce when there is
	// nothing left to remove.
	ErrCannotReduce = errors.New("nothing more to reduce")
	// ErrStructuredOutput means the model gave no valid object; the error is
	// a *StructuredError.
	ErrStructuredOutput = errors.New("structured output failed")
)

// InputError is a request the agent refuses. Kind is ErrInvalidInput or
// ErrInvalidSchema; Reason says what is wrong, for the caller to read.
type InputError struct {
	Kind   error
	Reason string
	// Err is the cause, when there is one, such as the schema compiler's.
	Err error
}

func (e *InputError) Error() string { return e.Kind.Error() + ": " + e.Reason }

// Is makes errors.Is(err, e.Kind) true.
func (e *InputError) Is(target error) bool { return target == e.Kind }

func (e *InputError) Unwrap() error { return e.Err }

func invalidInput(format string, args ...any) error {
	return newInputError(ErrInvalidInput, format, args...)
}

func invalidSchema(format string, args ...any) error {
	return newInputError(ErrInvalidSchema, format, args...)
}

func newInputError(kind error, format string, args ...any) *InputError {
	err := fmt.Errorf(format, args...)
	return &InputError{Kind: kind, Reason: err.Error(), Err: errors.Unwrap(err)}
}

// IsModelError reports whether err is a model failure of the given kind.
func IsModelError(err error, kind ErrorKind) bool {
	var me *ModelError
	return errors.As(err, &me) && me.Kind == kind
}

package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/ddbhistory"
	"github.com/lambda-agent/lambda-agent/internal/turn"
)

// Error is an answer other than success: an HTTP status and the body
// {"error":{"code","message","details"?}}. The message says what was wrong,
// for the caller to read.
type Error struct {
	Status  int    `json:"-"`
	Code    string `json:"code"`
	Message string `json:"message"`
	Details any    `json:"details,omitempty"`
	// RetryAfter, in seconds, is sent as the Retry-After header when set.
	RetryAfter int `json:"-"`
	// err is the cause, for the log; callers never see it.
	err error
	// allow lists the methods of a path, for a 405's Allow header.
	allow []string
}

func (e *Error) Error() string { return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Message) }

func (e *Error) Unwrap() error { return e.err }

// badRequest is a 400 with the given code and message.
func badRequest(code, format string, args ...any) *Error {
	return &Error{Status: http.StatusBadRequest, Code: code, Message: fmt.Sprintf(format, args...)}
}

// errDeleting marks the errors of a DELETE, whose unknown outcome is told
// apart from a turn's.
var errDeleting = errors.New("deleting a session")

// retryAfter is what 429 and 503 answers ask clients to wait, in seconds.
const retryAfter = 5

// errorFor maps an error from the agent or the store to its answer. It is the
// one place that chooses status codes for them.
func errorFor(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	switch {
	case errors.Is(err, turn.ErrKeyReused):
		return &Error{Status: http.StatusUnprocessableEntity, Code: "idempotency_key_reused", Message: "this Idempotency-Key was used for a different request; use a new key for a new request", err: err}
	case errors.Is(err, turn.ErrInProgress):
		return &Error{Status: http.StatusConflict, Code: "in_progress", Message: "a request with this Idempotency-Key is still running; retry shortly to get its response", RetryAfter: 2, err: err}
	case errors.Is(err, turn.ErrResuming):
		return &Error{Status: http.StatusConflict, Code: "conflict", Message: "another request is resuming this session's interrupted turn; nothing was done, so retry shortly to see its outcome", RetryAfter: 2, err: err}
	case errors.Is(err, turn.ErrNothingPending):
		return &Error{Status: http.StatusConflict, Code: "no_interrupt_pending", Message: "the session has no pending interrupts to respond to: the turn was resumed already, or never paused; GET the session to see where it stands", err: err}
	case errors.Is(err, agent.ErrUnknownTool):
		return &Error{Status: http.StatusNotFound, Code: "unknown_tool", Message: err.Error(), err: err}
	case errors.Is(err, turn.ErrReplayGone):
		return &Error{Status: http.StatusNotFound, Code: "not_found", Message: "the request with this Idempotency-Key was answered, but the session it went to has been deleted or rewound past it since", err: err}
	case errors.Is(err, turn.ErrInvalidRewind):
		return &Error{Status: http.StatusBadRequest, Code: "invalid_rewind", Message: strings.TrimPrefix(err.Error(), turn.ErrInvalidRewind.Error()+": "), err: err}
	}
	var (
		ti *agent.ToolInputError
		pe *turn.PendingError
		re *agent.ResponsesError
		ie *agent.InputError
		me *agent.ModelError
		se *agent.StructuredError
		tl *ddbhistory.TooLargeError
		ae *ddbhistory.ArgumentError
		te *ddbhistory.TableError
	)
	switch {
	case errors.As(err, &ti):
		return &Error{
			Status:  http.StatusBadRequest,
			Code:    "invalid_tool_input",
			Message: fmt.Sprintf("input does not match the input schema of tool %s", ti.Tool),
			Details: map[string][]string{"problems": ti.Problems},
			err:     err,
		}
	case errors.As(err, &pe):
		return &Error{
			Status:  http.StatusConflict,
			Code:    "interrupt_pending",
			Message: fmt.Sprintf("the session's last turn waits for responses to %s; send responses to resume it, or set deny_pending to deny them and send the message", plural(len(pe.Interrupts), "interrupt")),
			Details: map[string]any{"interrupts": pe.Interrupts},
			err:     err,
		}
	case errors.As(err, &re):
		return &Error{
			Status:  http.StatusBadRequest,
			Code:    "invalid_responses",
			Message: re.Error(),
			Details: map[string][]string{"missing": nonNil(re.Missing), "unknown": nonNil(re.Unknown), "problems": nonNil(re.Problems)},
			err:     err,
		}
	case errors.As(err, &ie) && ie.Kind == agent.ErrInvalidSchema:
		return &Error{Status: http.StatusBadRequest, Code: "invalid_schema", Message: ie.Error(), err: err}
	case errors.As(err, &ie):
		return &Error{Status: http.StatusBadRequest, Code: "invalid_content", Message: ie.Error(), err: err}
	case errors.As(err, &se):
		return &Error{
			Status:  http.StatusUnprocessableEntity,
			Code:    "structured_output_failed",
			Message: fmt.Sprintf("the model gave no object valid against the schema in %d attempts: %s", se.Attempts, se.Reason),
			Details: map[string]any{"attempts": se.Attempts, "errors": se.Problems},
			err:     err,
		}
	case errors.Is(err, agent.ErrStreamInterrupted):
		// Only a stream breaks off after part of it was sent; its status is
		// long gone, so the code is what the client sees.
		return &Error{Status: http.StatusBadGateway, Code: "stream_interrupted", Message: "the model's answer broke off after part of it was sent, so it was not retried; nothing was saved, and the message can be sent again", err: err}
	case errors.Is(err, agent.ErrContextOverflow):
		return &Error{Status: http.StatusRequestEntityTooLarge, Code: "context_overflow", Message: "the conversation no longer fits the model's context window, even reduced; start a new session or send less", err: err}
	case errors.Is(err, ddbhistory.ErrOutcomeUnknown) && errors.Is(err, errDeleting):
		return &Error{Status: http.StatusGatewayTimeout, Code: "outcome_unknown", Message: "the invocation ran out of time while the session was being deleted, so it may or may not be deleted; send the DELETE again to finish it", err: err}
	case errors.Is(err, ddbhistory.ErrOutcomeUnknown):
		return &Error{Status: http.StatusGatewayTimeout, Code: "outcome_unknown", Message: "the invocation ran out of time while the turn was being saved, so it may or may not be stored; retry with the same Idempotency-Key to get the stored answer, or GET the session to see", err: err}
	case errors.Is(err, ddbhistory.ErrDeleteUnfinished):
		return &Error{Status: http.StatusServiceUnavailable, Code: "unavailable", Message: "the session is deleted, but removing its items did not finish; send the DELETE again to finish it", RetryAfter: retryAfter, err: err}
	case errors.Is(err, agent.ErrDeadline), errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		// Every write that may land past its deadline is ErrOutcomeUnknown,
		// above; what is left ended before anything was written.
		return &Error{Status: http.StatusGatewayTimeout, Code: "timeout", Message: "the invocation ran out of time before the request finished; nothing was saved, so it can be retried", err: err}
	case errors.As(err, &me) && me.Kind == agent.KindNotFound:
		return misconfigured(err, "the model %q cannot be called by that id (Bedrock says: %s); set MODEL_ID to a model id or inference profile id that Bedrock offers in this Region", me.Model, me.Message)
	case errors.As(err, &me) && me.Kind == agent.KindDenied:
		return misconfigured(err, "the function may not call the model %q (Bedrock says: %s); enable access to it in the Bedrock console, or set MODEL_ID to a model this account may use", me.Model, me.Message)
	case errors.As(err, &te) && te.Missing:
		return misconfigured(err, "the session table %q does not exist; set TABLE_NAME to the name of an existing table, such as the stack's TableName output", te.Table)
	case errors.As(err, &te):
		// DynamoDB's own text names the account and the role: it goes to
		// the log, not to the caller.
		return misconfigured(err, "the function may not use the session table %q; check TABLE_NAME, and the function's credentials and role", te.Table)
	case errors.As(err, &me) && me.Kind == agent.KindThrottled:
		return &Error{Status: http.StatusTooManyRequests, Code: "throttled", Message: "the model is throttling requests; retry later", RetryAfter: retryAfter, err: err}
	case errors.As(err, &me):
		return &Error{Status: http.StatusBadGateway, Code: "model_error", Message: fmt.Sprintf("the model failed (%s): %s", me.Kind, me.Message), err: err}
	case errors.Is(err, ddbhistory.ErrNotFound):
		return &Error{Status: http.StatusNotFound, Code: "not_found", Message: "session not found", err: err}
	case errors.Is(err, ddbhistory.ErrDeleting):
		return &Error{Status: http.StatusConflict, Code: "conflict", Message: "the session is being deleted, so nothing was saved; if a DELETE of it failed, send it again, then retry to start a new session", err: err}
	case errors.Is(err, ddbhistory.ErrConflict):
		return &Error{Status: http.StatusConflict, Code: "conflict", Message: "another turn on this session finished first; nothing was saved, so the request can be retried", err: err}
	case errors.Is(err, ddbhistory.ErrThrottled):
		return &Error{Status: http.StatusTooManyRequests, Code: "throttled", Message: "the session store is throttling requests; retry later", RetryAfter: retryAfter, err: err}
	case errors.As(err, &tl):
		return &Error{Status: http.StatusRequestEntityTooLarge, Code: "too_large", Message: "the turn is too large to store: " + tl.Error(), err: err}
	case errors.As(err, &ae):
		return &Error{Status: http.StatusBadRequest, Code: "invalid_request", Message: ae.Error(), err: err}
	}
	// Anything else is a failure of the store or the platform, not of the
	// request: a 503, so that clients retry.
	return &Error{Status: http.StatusServiceUnavailable, Code: "unavailable", Message: "the service could not complete the request; retry later", RetryAfter: retryAfter, err: err}
}

// misconfigured is the error of a deployment whose settings are wrong: a
// 500, since no retry and no other request can succeed, with a message that
// names what is missing and the setting that fixes it.
func misconfigured(err error, format string, args ...any) *Error {
	return &Error{Status: http.StatusInternalServerError, Code: "misconfigured", Message: fmt.Sprintf(format, args...), err: err}
}

// plural counts n of noun, in English.
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// nonNil returns s, or an empty list for nil, so that JSON shows [].
func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

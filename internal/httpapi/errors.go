package httpapi

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/agui"
	"github.com/lambda-agent/lambda-agent/internal/memory"
	"github.com/lambda-agent/lambda-agent/internal/turn"
)

// Error is an answer other than success: an HTTP status and the body
// {"error":{"code","message","details"?}}. The message says what was wrong,
// for the caller to read.
type Error struct {
	// Code says what went wrong, and chooses the status (see statusOf).
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

func (e *Error) Error() string { return fmt.Sprintf("%d %s: %s", e.Status(), e.Code, e.Message) }

// Status is the answer's HTTP status, which its code chooses.
func (e *Error) Status() int { return statusOf(e.Code) }

func (e *Error) Unwrap() error { return e.err }

// problem is an answer with the given code, which says what went wrong
// (its status is statusOf's), and message.
func problem(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// badRequest is a problem with the request itself; its status is 400.
func badRequest(code, format string, args ...any) *Error { return problem(code, format, args...) }

// statusOf is the one place that chooses the status of an answer: by its
// code, which says what went wrong. errorFor chooses the code of an error
// from the service, the agent or the store.
func statusOf(code string) int {
	switch code {
	case "invalid_json", "invalid_body", "invalid_base64", "invalid_request", "invalid_session_id", "invalid_limit",
		"invalid_idempotency_key", "invalid_path", "invalid_content", "invalid_schema", "invalid_tool_input",
		"invalid_responses", "invalid_rewind", "invalid_session_document", "unsupported_format_version":
		return http.StatusBadRequest
	case "unauthorized":
		return http.StatusUnauthorized
	case "not_found", "no_route", "unknown_tool", "unknown_agent", "import_not_found", "audit_off":
		return http.StatusNotFound
	case "method_not_allowed":
		return http.StatusMethodNotAllowed
	case "conflict", "in_progress", "session_exists", "session_changed", "interrupt_pending", "no_interrupt_pending", "client_tool_pending",
		"thread_mismatch":
		return http.StatusConflict
	case "message_too_large", "too_large", "context_overflow":
		return http.StatusRequestEntityTooLarge
	case "idempotency_key_reused", "structured_output_failed":
		return http.StatusUnprocessableEntity
	case "throttled":
		return http.StatusTooManyRequests
	case "model_error", "stream_interrupted":
		return http.StatusBadGateway
	case "unavailable":
		return http.StatusServiceUnavailable
	case "timeout", "outcome_unknown":
		return http.StatusGatewayTimeout
	}
	return http.StatusInternalServerError // "internal", "misconfigured"
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
	case errors.Is(err, turn.ErrAuditOff):
		return &Error{Code: "audit_off", Message: "this deployment keeps no audit record of its model calls: set AUDIT=on to keep one", err: err}
	case errors.Is(err, turn.ErrKeyReused):
		return &Error{Code: "idempotency_key_reused", Message: "this Idempotency-Key was used for a different request; use a new key for a new request", err: err}
	case errors.Is(err, turn.ErrInProgress):
		return &Error{Code: "in_progress", Message: "a request with this Idempotency-Key is still running; retry shortly to get its response", RetryAfter: 2, err: err}
	case errors.Is(err, turn.ErrResuming):
		return &Error{Code: "conflict", Message: "another request is resuming this session's interrupted turn; nothing was done, so retry shortly to see its outcome", RetryAfter: 2, err: err}
	case errors.Is(err, turn.ErrNothingPending):
		return &Error{Code: "no_interrupt_pending", Message: "the session has no pending interrupts to respond to: the turn was resumed already, or never paused; GET the session to see where it stands", err: err}
	case errors.Is(err, agent.ErrUnknownTool):
		return &Error{Code: "unknown_tool", Message: err.Error(), err: err}
	case errors.Is(err, turn.ErrUnknownAgent):
		return &Error{Code: "unknown_agent", Message: err.Error() + "; the main agent's transcript is GET /sessions/{sessionId} without ?agent=", err: err}
	case errors.Is(err, turn.ErrReplayGone):
		return &Error{Code: "not_found", Message: "the request with this Idempotency-Key was answered, but the session it went to has been deleted or rewound past it since", err: err}
	case errors.Is(err, turn.ErrSessionExists):
		// The caller's session, or another owner's, which the answer must
		// not tell apart.
		var se *turn.SessionExistsError
		errors.As(err, &se)
		return &Error{Code: "session_exists", Message: fmt.Sprintf("the session id %q is in use, and an import never overwrites a session; import under another new_session_id, or leave it out for a new id", se.ID), err: err}
	case errors.Is(err, turn.ErrImportNotFound):
		return &Error{Code: "import_not_found", Message: "no import is under way with this token: it was completed (GET the session), replaced by a later import under the same id, or has expired; start again from the first page", err: err}
	case errors.Is(err, turn.ErrKeyOnPagedImport):
		return &Error{Code: "invalid_request", Message: "an import in pages takes no Idempotency-Key: each page says where it starts, so a page sent again is not stored twice; send a page again when its answer is lost, and GET the session when the last one's is", err: err}
	case errors.Is(err, turn.ErrSessionChanged):
		return &Error{Code: "session_changed", Message: "the session changed since its export began (a turn or a rewind), so its pages would not fit together; export it again from the first page", err: err}
	case errors.Is(err, agui.ErrInvalidInput):
		return &Error{Code: "invalid_request", Message: err.Error(), err: err}
	case errors.Is(err, agui.ErrThreadMismatch):
		return &Error{Code: "thread_mismatch", Message: err.Error(), err: err}
	case errors.Is(err, turn.ErrInvalidRequest):
		return &Error{Code: "invalid_request", Message: strings.TrimPrefix(err.Error(), turn.ErrInvalidRequest.Error()+": "), err: err}
	case errors.Is(err, turn.ErrInvalidCursor):
		return &Error{Code: "invalid_request", Message: err.Error(), err: err}
	case errors.Is(err, turn.ErrInvalidRewind):
		return &Error{Code: "invalid_rewind", Message: strings.TrimPrefix(err.Error(), turn.ErrInvalidRewind.Error()+": "), err: err}
	}
	var (
		de *turn.DocumentError
		ti *agent.ToolInputError
		pe *turn.PendingError
		re *agent.ResponsesError
		ie *agent.InputError
		me *agent.ModelError
		se *agent.StructuredError
		tl *turn.TooLargeError
		ae *turn.ArgumentError
		te *turn.TableError
	)
	switch {
	case errors.As(err, &de) && de.Kind == turn.ErrUnsupportedVersion:
		return &Error{Code: "unsupported_format_version", Message: de.Reason, err: err}
	case errors.As(err, &de) && de.Kind == turn.ErrDocumentTooLarge:
		return &Error{Code: "too_large", Message: de.Reason, err: err}
	case errors.As(err, &de):
		return &Error{Code: "invalid_session_document", Message: de.Reason, err: err}
	case errors.As(err, &ti):
		return &Error{Code: "invalid_tool_input",
			Message: fmt.Sprintf("input does not match the input schema of tool %s", ti.Tool),
			Details: map[string][]string{"problems": ti.Problems},
			err:     err,
		}
	case errors.As(err, &pe) && len(clientCalls(pe.Interrupts)) > 0:
		return &Error{Code: "client_tool_pending",
			Message: fmt.Sprintf("the session's last turn waits for the client application's %s of %s; send the %s (AG-UI: a tool message for each call), or deny the %s (POST /chat: deny_pending; AG-UI: a cancelled resume entry) and send the message",
				plural(len(clientCalls(pe.Interrupts)), "result"), strings.Join(clientCalls(pe.Interrupts), ", "), plural(len(clientCalls(pe.Interrupts)), "result"), plural(len(clientCalls(pe.Interrupts)), "call")),
			Details: map[string]any{"interrupts": pe.Interrupts},
			err:     err,
		}
	case errors.As(err, &pe):
		return &Error{Code: "interrupt_pending",
			Message: fmt.Sprintf("the session's last turn waits for responses to %s; send responses to resume it, or set deny_pending to deny them and send the message", plural(len(pe.Interrupts), "interrupt")),
			Details: map[string]any{"interrupts": pe.Interrupts},
			err:     err,
		}
	case errors.As(err, &re):
		return &Error{Code: "invalid_responses",
			Message: re.Error(),
			Details: map[string][]string{"missing": nonNil(re.Missing), "unknown": nonNil(re.Unknown), "problems": nonNil(re.Problems)},
			err:     err,
		}
	case errors.As(err, &ie) && ie.Kind == agent.ErrInvalidSchema:
		return &Error{Code: "invalid_schema", Message: ie.Error(), err: err}
	case errors.As(err, &ie):
		return &Error{Code: "invalid_content", Message: ie.Error(), err: err}
	case errors.As(err, &se):
		return &Error{Code: "structured_output_failed",
			Message: fmt.Sprintf("the model gave no object valid against the schema in %d attempts: %s", se.Attempts, se.Reason),
			Details: map[string]any{"attempts": se.Attempts, "errors": se.Problems},
			err:     err,
		}
	case errors.Is(err, agent.ErrStreamInterrupted):
		// Only a stream breaks off after part of it was sent; its status is
		// long gone, so the code is what the client sees.
		return &Error{Code: "stream_interrupted", Message: "the model's answer broke off after part of it was sent, so it was not retried; nothing was saved, and the message can be sent again", err: err}
	case errors.Is(err, agent.ErrContextOverflow):
		return &Error{Code: "context_overflow", Message: "the conversation no longer fits the model's context window, even reduced; start a new session or send less", err: err}
	case errors.Is(err, turn.ErrOutcomeUnknown) && errors.Is(err, errDeleting):
		return &Error{Code: "outcome_unknown", Message: "the invocation ran out of time while the session was being deleted, so it may or may not be deleted; send the DELETE again to finish it", err: err}
	case errors.Is(err, turn.ErrOutcomeUnknown):
		return &Error{Code: "outcome_unknown", Message: "the invocation ran out of time while the turn was being saved, so it may or may not be stored; retry with the same Idempotency-Key to get the stored answer, or GET the session to see", err: err}
	case errors.Is(err, turn.ErrDeleteUnfinished):
		return &Error{Code: "unavailable", Message: "the session is deleted, but removing its items did not finish; send the DELETE again to finish it", RetryAfter: retryAfter, err: err}
	case errors.Is(err, agent.ErrDeadline), errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		// Every write that may land past its deadline is ErrOutcomeUnknown,
		// above; what is left ended before anything was written.
		return &Error{Code: "timeout", Message: "the invocation ran out of time before the request finished; nothing was saved, so it can be retried", err: err}
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
		return &Error{Code: "throttled", Message: "the model is throttling requests; retry later", RetryAfter: retryAfter, err: err}
	case errors.As(err, &me):
		return &Error{Code: "model_error", Message: fmt.Sprintf("the model failed (%s): %s", me.Kind, me.Message), err: err}
	case errors.Is(err, memory.ErrNotFound):
		return &Error{Code: "not_found", Message: "memory record not found", err: err}
	case errors.Is(err, memory.ErrInvalid):
		return &Error{Code: "invalid_request", Message: err.Error(), err: err}
	case errors.Is(err, turn.ErrNotFound):
		return &Error{Code: "not_found", Message: "session not found", err: err}
	case errors.Is(err, turn.ErrDeleting):
		return &Error{Code: "conflict", Message: "the session is being deleted, so nothing was saved; if a DELETE of it failed, send it again, then retry to start a new session", err: err}
	case errors.Is(err, turn.ErrConflict):
		return &Error{Code: "conflict", Message: "another turn on this session finished first; nothing was saved, so the request can be retried", err: err}
	case errors.Is(err, turn.ErrThrottled):
		return &Error{Code: "throttled", Message: "the session store is throttling requests; retry later", RetryAfter: retryAfter, err: err}
	case errors.As(err, &tl):
		return &Error{Code: "too_large", Message: "the turn is too large to store: " + tl.Error(), err: err}
	case errors.As(err, &ae):
		return &Error{Code: "invalid_request", Message: ae.Error(), err: err}
	}
	// Anything else is a failure of the store or the platform, not of the
	// request: a 503, so that clients retry.
	return &Error{Code: "unavailable", Message: "the service could not complete the request; retry later", RetryAfter: retryAfter, err: err}
}

// misconfigured is the error of a deployment whose settings are wrong: a
// 500, since no retry and no other request can succeed, with a message that
// names what is missing and the setting that fixes it.
func misconfigured(err error, format string, args ...any) *Error {
	return &Error{Code: "misconfigured", Message: fmt.Sprintf(format, args...), err: err}
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

// clientCalls names the client tools' calls among interrupts, as "call id
// (tool)".
func clientCalls(interrupts []agent.Interrupt) []string {
	var out []string
	for _, in := range interrupts {
		if in.Kind == agent.KindClientTool {
			out = append(out, fmt.Sprintf("call %s (%s)", in.ID, in.Tool))
		}
	}
	return out
}

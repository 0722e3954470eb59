package runtimetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
)

// ErrTimeout is wrapped by the error of an invocation that did not answer
// within its timeout plus [Config.TimeoutGrace]. The process has been
// killed by then, as Lambda kills a sandbox whose function times out.
var ErrTimeout = errors.New("invocation timed out")

// ErrClosed is returned by the methods of a [Function] that was closed.
var ErrClosed = errors.New("runtimetest: function closed")

// InvokeError is a failure the runtime reported through the Runtime API: a
// POST to /runtime/invocation/{id}/error (the handler returned an error or
// panicked), error trailers on a response, or, when Init is set, a POST to
// /runtime/init/error. The emulator's own judgements use it too: a response
// over [MaxResponseSize] has Type "Function.ResponseSizeTooLarge".
type InvokeError struct {
	// RequestID is the invocation's request id; empty for an init error
	// that was served to an invocation the runtime never fetched.
	RequestID string
	// Type is errorType from the body, or the
	// Lambda-Runtime-Function-Error-Type header (or trailer) when the body
	// has none. For aws-lambda-go it is the Go type name of the error
	// ("errorString", "deadlineExceededError") or of the panic value
	// ("string" for panic("…")).
	Type string
	// Message is errorMessage from the body.
	Message string
	// StackTrace is stackTrace from the body, as sent: aws-lambda-go sends
	// an array of {"path","line","label"} for a panic and nothing for an
	// error.
	StackTrace json.RawMessage
	// Payload is the error body as the runtime sent it.
	Payload []byte
	// Init reports an error from the init phase.
	Init bool
}

// Error returns the phase, the type and the message.
func (e *InvokeError) Error() string {
	phase := "function error"
	if e.Init {
		phase = "init error"
	}
	if e.Type == "" {
		return phase + ": " + e.Message
	}
	return phase + ": " + e.Type + ": " + e.Message
}

// errorBody is the standard Lambda error document.
type errorBody struct {
	Message    string          `json:"errorMessage"`
	Type       string          `json:"errorType"`
	StackTrace json.RawMessage `json:"stackTrace"`
}

// newInvokeError builds an InvokeError from an error document and the
// error type sent in a header or trailer. A body that is not the standard
// document is kept whole as the message.
func newInvokeError(id string, payload []byte, headerType string) *InvokeError {
	e := &InvokeError{RequestID: id, Type: headerType, Payload: payload}
	var body errorBody
	if err := json.Unmarshal(payload, &body); err != nil {
		e.Message = string(payload)
		return e
	}
	e.Message = body.Message
	e.StackTrace = body.StackTrace
	if body.Type != "" {
		e.Type = body.Type
	}
	return e
}

// ExitError reports that the function's process ended. An invocation that
// was in flight, or that comes afterwards, fails with it.
type ExitError struct {
	// Pid is the process id the process had.
	Pid int
	// State is the process's exit state: ExitCode is -1 when it was killed
	// by a signal.
	State *os.ProcessState
	// Killed reports that runtimetest ended it, with SIGKILL or, at
	// shutdown, SIGTERM: [Function.Kill], [Function.Close],
	// [Function.Restart] or a timeout.
	Killed bool
	// Stderr is the last lines the process wrote to stderr, where Go
	// writes panics, fatal errors and the log package's output.
	Stderr string
}

// Error says that the process exited, how, and what it last said.
func (e *ExitError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "process %d exited (%s)", e.Pid, e.State)
	if e.Killed {
		b.WriteString(", killed by runtimetest")
	}
	if e.Stderr != "" {
		b.WriteString("; last lines of stderr:\n")
		b.WriteString(e.Stderr)
	}
	return b.String()
}

// ExitCode returns the process's exit code, or -1 if a signal ended it.
func (e *ExitError) ExitCode() int {
	return e.State.ExitCode()
}

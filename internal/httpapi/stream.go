package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime/debug"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdaurl"
	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/ddbhistory"
)

// RouteChatStream is the streaming chat route, as the log names it.
const RouteChatStream = "POST /chat/stream"

// The events of a streamed chat turn, in Server-Sent Events' "event" field.
// A stream is start, then text, tool_use and tool_result in the order they
// happen, then done or error. Each event's data is one JSON object.
const (
	EventStart      = "start"       // {"session_id"}
	EventText       = "text"        // {"delta"}: a piece of the model's text
	EventToolUse    = "tool_use"    // {"id","name","input"}
	EventToolResult = "tool_result" // {"id","status","preview"}
	EventDone       = "done"        // a ChatResponse: the turn is committed
	EventError      = "error"       // {"error":{"code","message"}}: nothing was committed
)

// ToolResultPreview is the data of a tool_result event.
type ToolResultPreview struct {
	ID     string                 `json:"id"`
	Status agent.ToolResultStatus `json:"status"`
	// Preview is the start of the result's content, as text.
	Preview string `json:"preview"`
}

// maxPreview bounds a tool_result's preview, in bytes.
const maxPreview = 300

// ChatStream serves POST /chat as Server-Sent Events: the same request,
// idempotency, owner scoping and errors as Chat, with the turn streamed as
// it happens. It is an http.Handler for a Lambda function URL in
// RESPONSE_STREAM mode (through lambdaurl) and for the local run.
//
// Errors found before the turn begins (a bad request, an unknown session,
// an Idempotency-Key in use) are answered with their status and JSON body,
// as Chat answers them. Once the stream has begun, a failure is an error
// event; the turn is committed only if it completed, and done is sent only
// after the commit.
func (h *Handler) ChatStream(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	req := eventFromHTTP(r, h.bodyLimit())
	rec := &record{}
	s := &sse{w: w}
	defer func() {
		if v := recover(); v != nil {
			rec.err = fmt.Errorf("panic: %v\n%s", v, debug.Stack())
			s.fail(&Error{Status: http.StatusInternalServerError, Code: "internal", Message: "an internal error occurred"}, rec)
		}
		h.log(r.Context(), RouteChatStream, s.status, rec, time.Since(start))
	}()
	if r.Method != http.MethodPost {
		s.fail(&Error{Status: http.StatusMethodNotAllowed, Code: "method_not_allowed", Message: fmt.Sprintf("%s is not allowed; use POST", r.Method)}, rec)
		return
	}
	_, body, err := h.chatStream(r.Context(), req, rec, s)
	if err != nil {
		var te *agent.TurnError
		if errors.As(err, &te) {
			rec.result = &agent.Result{Usage: te.Usage, Metrics: te.Metrics}
		}
		s.fail(errorFor(err), rec)
		return
	}
	rec.outcome = "ok"
	if !s.started { // a replay: the turn ran in an earlier request
		var resp ChatResponse
		_ = json.Unmarshal(body, &resp) // this handler's own encoding
		s.begin(resp.SessionID)
	}
	s.event(EventDone, json.RawMessage(body))
}

// FunctionURL is the stream function's handler. Its function URL serves POST,
// on any path, as the streaming chat, and GET /sessions and GET and DELETE
// /sessions/{sessionId} as the chat function does. Callers that sign with
// IAM own their sessions as iam:<ARN>, which the HTTP API's routes, behind a
// JWT authorizer or none, cannot reach; this is where such a caller lists,
// reloads and deletes them.
func (h *Handler) FunctionURL() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			h.ChatStream(w, r)
			return
		}
		req := eventFromHTTP(r, h.bodyLimit())
		req.RouteKey = ""                    // the route comes from the method and path
		resp, _ := h.Chat(r.Context(), *req) // Chat answers every error itself
		for k, v := range resp.Headers {
			w.Header().Set(k, v)
		}
		w.WriteHeader(resp.StatusCode)
		_, _ = io.WriteString(w, resp.Body) // a client that left cannot be told
	})
}

func (h *Handler) chatStream(ctx context.Context, req *events.APIGatewayV2HTTPRequest, rec *record, s *sse) (int, []byte, error) {
	return h.chatTurn(ctx, req, rec, func(sess *ddbhistory.Session, input []agent.ContentBlock) (*agent.Result, error) {
		s.begin(sess.ID)
		return h.cfg.Agent.Stream(ctx, &sess.Conversation, input, s.emit)
	})
}

// eventFromHTTP turns r into the payload 2.0 event the handlers read: the
// body, read to at most limit+1 bytes so that a larger one is refused
// without reading it all, and the caller's IAM identity when r came through
// a function URL with AWS_IAM auth.
func eventFromHTTP(r *http.Request, limit int) *events.APIGatewayV2HTTPRequest {
	body, _ := io.ReadAll(io.LimitReader(r.Body, int64(limit)+1)) // a short read is a short body
	req := &events.APIGatewayV2HTTPRequest{
		Version:  "2.0",
		RouteKey: RouteChatStream,
		RawPath:  r.URL.Path,
		Headers:  make(map[string]string, len(r.Header)),
		Body:     string(body),
	}
	req.RequestContext.HTTP.Method = r.Method
	req.RequestContext.HTTP.Path = r.URL.Path
	for name, values := range r.Header {
		req.Headers[strings.ToLower(name)] = strings.Join(values, ",")
	}
	if q := r.URL.Query(); len(q) > 0 {
		req.RawQueryString = r.URL.RawQuery
		req.QueryStringParameters = make(map[string]string, len(q))
		for name, values := range q {
			req.QueryStringParameters[name] = strings.Join(values, ",")
		}
	}
	if u, ok := lambdaurl.RequestFromContext(r.Context()); ok {
		req.RequestContext.RequestID = u.RequestContext.RequestID
		if a := u.RequestContext.Authorizer; a != nil && a.IAM != nil {
			req.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{
				IAM: &events.APIGatewayV2HTTPRequestContextAuthorizerIAMDescription{
					AccessKey: a.IAM.AccessKey, AccountID: a.IAM.AccountID, CallerID: a.IAM.CallerID,
					UserARN: a.IAM.UserARN, UserID: a.IAM.UserID,
				},
			}
		}
	}
	return req
}

// sse writes a Server-Sent Events stream. The agent emits from one goroutine
// at a time; the mutex also orders the handler's own events after them.
type sse struct {
	mu      sync.Mutex
	w       http.ResponseWriter
	started bool
	status  int
}

// begin sends the headers and the start event.
func (s *sse) begin(sessionID string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	h := s.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	s.w.WriteHeader(http.StatusOK)
	s.started, s.status = true, http.StatusOK
	s.write(EventStart, map[string]string{"session_id": sessionID})
}

// emit sends an agent event.
func (s *sse) emit(e agent.Event) {
	switch {
	case e.Text != "":
		s.event(EventText, map[string]string{"delta": e.Text})
	case e.ToolUse != nil:
		s.event(EventToolUse, map[string]any{"id": e.ToolUse.ToolUseID, "name": e.ToolUse.Name, "input": e.ToolUse.Input})
	case e.ToolResult != nil:
		s.event(EventToolResult, ToolResultPreview{ID: e.ToolResult.ToolUseID, Status: e.ToolResult.Status, Preview: preview(e.ToolResult)})
	}
}

func (s *sse) event(name string, data any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.write(name, data)
}

// fail answers e: an error event once the stream has begun, else the
// status and JSON body Chat would answer.
func (s *sse) fail(e *Error, rec *record) {
	rec.outcome = e.Code
	if rec.err == nil {
		rec.err = e.err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started {
		s.write(EventError, map[string]*Error{"error": e})
		return
	}
	resp := errorResponse(e, rec)
	for k, v := range resp.Headers {
		s.w.Header().Set(k, v)
	}
	s.w.WriteHeader(resp.StatusCode)
	s.status = resp.StatusCode
	_, _ = io.WriteString(s.w, resp.Body) // a client that left cannot be told
}

// write sends one event and flushes it. A client that went away is not an
// error: the turn goes on, and commits or not, on its own.
func (s *sse) write(name string, data any) {
	b, err := json.Marshal(data)
	if err != nil {
		b, _ = json.Marshal(map[string]*Error{"error": {Code: "internal", Message: "an event could not be encoded"}})
		name = EventError
	}
	_, _ = fmt.Fprintf(s.w, "event: %s\ndata: %s\n\n", name, b)
	if f, ok := s.w.(http.Flusher); ok {
		f.Flush()
	}
}

// preview returns the start of a tool result's content as text.
func preview(r *agent.ToolResultBlock) string {
	var b strings.Builder
	for _, c := range r.Content {
		switch {
		case c.Text != "":
			b.WriteString(c.Text)
		case c.JSON != nil:
			b.Write(c.JSON)
		case c.Image != nil:
			b.WriteString("[image]")
		case c.Document != nil:
			b.WriteString("[document]")
		}
		if b.Len() >= maxPreview {
			break
		}
		b.WriteByte(' ')
	}
	p := strings.TrimSpace(b.String())
	if len(p) <= maxPreview {
		return p
	}
	cut := maxPreview
	for cut > 0 && !utf8.RuneStart(p[cut]) {
		cut--
	}
	return p[:cut] + "…"
}

package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/lambdahttp"
	"github.com/lambda-agent/lambda-agent/internal/turn"
)

// ChatRequest is the body of POST /chat: a message, or content blocks in
// Bedrock's shape; or, for a session whose turn waits for a person, the
// responses to its interrupts.
type ChatRequest struct {
	SessionID *string           `json:"session_id,omitempty"`
	Message   *string           `json:"message,omitempty"`
	Content   []json.RawMessage `json:"content,omitempty"`
	// Responses answer the session's pending interrupts and resume its
	// turn; they come without a message.
	Responses []agent.Response `json:"responses,omitempty"`
	// DenyPending denies the session's pending interrupts, so that the
	// message can be sent.
	DenyPending bool `json:"deny_pending,omitempty"`
	// Regenerate runs the session's last user message again, in place of
	// its last turn; it comes without a message.
	Regenerate bool `json:"regenerate,omitempty"`
	// Edit replaces the user message at Edit.From, and all that follows
	// it, with Edit's message or content, and runs it.
	Edit *EditRequest `json:"edit,omitempty"`
}

// EditRequest is the edit of POST /chat: a message, or content blocks, to
// run in place of the user message at From.
type EditRequest struct {
	From    *int              `json:"from"`
	Message *string           `json:"message,omitempty"`
	Content []json.RawMessage `json:"content,omitempty"`
}

// ChatResponse is the answer to POST /chat.
type ChatResponse = turn.ChatAnswer

// StructuredResponse is the answer to POST /structured.
type StructuredResponse = turn.StructuredAnswer

// bodyLimit allows for base64 and JSON escaping around a message of the
// maximum size.
func (h *Handler) bodyLimit() int { return 2*h.cfg.MaxMessageBytes + 64<<10 }

// turnRequest reads what every turn's request carries: the caller, the
// Idempotency-Key header, and the body, decoded into v. The fingerprint
// covers route and body, so that a key sent again with another body is told
// from a retry; chat and streamed chat share RouteChat, so a key sent to
// either replays the same turn.
func (h *Handler) turnRequest(r *http.Request, route string, v any) (turn.Request, *Error) {
	owner, e := h.owner(r)
	if e != nil {
		return turn.Request{}, e
	}
	key, e := idempotencyKey(r)
	if e != nil {
		return turn.Request{}, e
	}
	raw, e := body(r, h.bodyLimit())
	if e != nil {
		return turn.Request{}, e
	}
	if e := decodeJSON(raw, v, "the body"); e != nil {
		return turn.Request{}, e
	}
	return turn.Request{Owner: owner, IdempotencyKey: key, Fingerprint: turn.Fingerprint(route, raw)}, nil
}

// chatRequest reads a POST /chat request, streamed or not.
func (h *Handler) chatRequest(r *http.Request, rec *record) (turn.Chat, *Error) {
	var in ChatRequest
	req, e := h.turnRequest(r, RouteChat, &in)
	if e != nil {
		return turn.Chat{}, e
	}
	if req.SessionID, e = namedSession(in.SessionID, rec); e != nil {
		return turn.Chat{}, e
	}
	if in.Responses != nil {
		return turn.Chat{Request: req, Responses: in.Responses}, resumeRequest(&in)
	}
	if in.Regenerate || in.Edit != nil {
		return h.redoRequest(req, &in)
	}
	input, e := content("message", in.Message, in.Content, h.cfg.MaxMessageBytes)
	if e != nil {
		return turn.Chat{}, e
	}
	return turn.Chat{Request: req, Content: input, DenyPending: in.DenyPending}, nil
}

// redoRequest reads a regenerate or an edit.
func (h *Handler) redoRequest(req turn.Request, in *ChatRequest) (turn.Chat, *Error) {
	switch {
	case in.SessionID == nil:
		return turn.Chat{}, badRequest("invalid_request", "regenerate and edit need the session_id of the session to rewind")
	case in.Regenerate && in.Edit != nil:
		return turn.Chat{}, badRequest("invalid_request", "send either regenerate or edit, not both")
	case in.Message != nil || in.Content != nil:
		return turn.Chat{}, badRequest("invalid_request", "regenerate runs the last user message again, and an edit carries its own message in edit.message; send no message or content beside them")
	case in.DenyPending:
		return turn.Chat{}, badRequest("invalid_request", "regenerate and edit discard what the session has pending; deny_pending is not needed")
	case in.Regenerate:
		return turn.Chat{Request: req, Regenerate: true}, nil
	case in.Edit.From == nil:
		return turn.Chat{}, badRequest("invalid_request", "edit.from is required: the index of the user message to replace, as GET /sessions/{id} lists them")
	case *in.Edit.From < 0:
		return turn.Chat{}, badRequest("invalid_rewind", "edit.from is %d; message indexes start at 0", *in.Edit.From)
	}
	input, e := content("edit.message", in.Edit.Message, in.Edit.Content, h.cfg.MaxMessageBytes)
	if e != nil {
		return turn.Chat{}, e
	}
	return turn.Chat{Request: req, Edit: &turn.Edit{From: *in.Edit.From, Content: input}}, nil
}

// RewindRequest is the body of POST /sessions/{sessionId}/rewind.
type RewindRequest struct {
	// To is the index of the first message to discard: the start of a
	// user turn.
	To *int `json:"to"`
}

// RewindResponse is the answer to a rewind.
type RewindResponse = turn.RewindAnswer

func (h *Handler) rewind(r *http.Request, rec *record) (int, []byte, error) {
	id := r.PathValue("sessionId")
	var in RewindRequest
	// The session is in the path, which the fingerprint must cover too.
	req, e := h.turnRequest(r, "POST /sessions/"+id+"/rewind", &in)
	if e != nil {
		return 0, nil, e
	}
	if req.SessionID, e = namedSession(&id, rec); e != nil {
		return 0, nil, e
	}
	switch {
	case in.To == nil:
		return 0, nil, badRequest("invalid_request", "to is required: the index of the first message to discard, the start of a user turn")
	case *in.To < 0:
		return 0, nil, badRequest("invalid_rewind", "to is %d; message indexes start at 0", *in.To)
	}
	out, err := h.cfg.Service.Rewind(r.Context(), turn.Rewind{Request: req, To: *in.To})
	status, body, err := answer(out, err, rec)
	rec.result = nil // no model, no tools: nothing to count
	return status, body, err
}

// maxResponses bounds the responses of one request: the interrupts of one
// answer, which are its tool uses.
const maxResponses = 100

// resumeRequest checks a request that responds to interrupts, before the
// session is read: what a response must hold whatever it answers.
func resumeRequest(in *ChatRequest) *Error {
	switch {
	case in.Message != nil || in.Content != nil:
		return badRequest("invalid_request", "responses resume the paused turn, and come without a message or content; send the message in a later request, or deny_pending with it")
	case in.DenyPending:
		return badRequest("invalid_request", "send either responses or deny_pending, not both")
	case in.Regenerate || in.Edit != nil:
		return badRequest("invalid_request", "responses resume the paused turn; a regenerate or an edit discards it instead, so send one or the other")
	case in.SessionID == nil:
		return badRequest("invalid_request", "responses need the session_id of the session whose interrupts they answer")
	case len(in.Responses) == 0:
		return badRequest("invalid_request", "responses is empty: answer each pending interrupt, as listed by GET /sessions/{id}")
	case len(in.Responses) > maxResponses:
		return badRequest("invalid_request", "%d responses; at most %d", len(in.Responses), maxResponses)
	}
	return nil
}

func (h *Handler) chat(r *http.Request, rec *record) (int, []byte, error) {
	c, e := h.chatRequest(r, rec)
	if e != nil {
		return 0, nil, e
	}
	out, err := h.cfg.Service.Chat(r.Context(), c)
	if err != nil {
		return 0, nil, err
	}
	rec.result, rec.replayed = out.Result, out.Replayed
	body, err := fitAnswer(budget(r), out.Answer.Messages, out.First, func(raws []json.RawMessage) any { return chatBody{ChatAnswer: out.Answer, Messages: raws} })
	return http.StatusOK, body, err
}

// chatBody is a chat answer whose messages are encoded already, and fitted
// to the response (see messageList): its Messages stand for the answer's.
type chatBody struct {
	turn.ChatAnswer
	Messages []json.RawMessage `json:"messages"`
}

// answer encodes a turn's outcome as a 200, noting it in rec.
func answer[A any](out *turn.Outcome[A], err error, rec *record) (int, []byte, error) {
	if err != nil {
		return 0, nil, err
	}
	rec.result, rec.replayed = out.Result, out.Replayed
	return jsonOK(out.Answer)
}

// namedSession returns the session a turn's body names, checked; "" for
// none, which starts a new one.
func namedSession(id *string, rec *record) (string, *Error) {
	if id == nil {
		return "", nil
	}
	rec.sessionID = *id
	if !turn.ValidID(*id) {
		return "", badRequest("invalid_session_id", "session_id %q must be 1 to 128 letters, digits, '.', '_', ':' or '-', starting with a letter or digit", *id)
	}
	return *id, nil
}

// ToolCallRequest is the body of POST /sessions/{sessionId}/tools/{name}:
// a direct call of one of the agent's tools, without the model.
type ToolCallRequest struct {
	// Input is the tool's input, a JSON object; absent means {}.
	Input json.RawMessage `json:"input,omitempty"`
	// Record adds the call to the conversation, so that the model knows of
	// it; absent means true.
	Record *bool `json:"record,omitempty"`
}

// ToolCallResponse is the answer to a direct tool call.
type ToolCallResponse = turn.ToolAnswer

func (h *Handler) callTool(r *http.Request, rec *record) (int, []byte, error) {
	id, name := r.PathValue("sessionId"), r.PathValue("name")
	var in ToolCallRequest
	// The session and the tool are in the path, which the fingerprint
	// must cover too.
	req, e := h.turnRequest(r, "POST /sessions/"+id+"/tools/"+name, &in)
	if e != nil {
		return 0, nil, e
	}
	if req.SessionID, e = namedSession(&id, rec); e != nil {
		return 0, nil, e
	}
	input := bytes.TrimSpace(in.Input)
	switch {
	case len(input) == 0 || string(input) == "null":
		input = nil // the agent's {} for none
	case input[0] != '{':
		return 0, nil, badRequest("invalid_request", "input must be a JSON object, the tool's input; got %s", jsonValue(kindOf(input[0])))
	case len(input) > h.cfg.MaxMessageBytes:
		return 0, nil, &Error{Code: "message_too_large", Message: fmt.Sprintf("input is %d bytes; at most %d (MAX_MESSAGE_BYTES)", len(input), h.cfg.MaxMessageBytes)}
	}
	out, err := h.cfg.Service.CallTool(r.Context(), turn.ToolCall{
		Request: req,
		Name:    name,
		Input:   input,
		Record:  in.Record == nil || *in.Record,
	})
	if err != nil {
		return 0, nil, err
	}
	rec.result, rec.replayed = out.Result, out.Replayed
	a, limit := out.Answer, budget(r)
	set := func(raws []json.RawMessage) any { return toolBody{ToolAnswer: a, Messages: raws} }
	body, err := fitAnswer(limit, a.Messages, out.First, set)
	if err == nil && limit > 0 && lambdahttp.BodySize(body) > limit {
		// The result alone is too large: the recorded message holds it,
		// and the function URL, which streams, carries it whole.
		note := "[the result is too large for this answer, which Lambda carries in 6 MB: call the tool through the stream function's URL, which streams]"
		if a.Recorded {
			note = "[the result is too large for this answer, which Lambda carries in 6 MB: the session's message that records it holds it, and the stream function's URL, which streams, serves it]"
		}
		a.Content = []agent.ToolResultContent{{Text: note}}
		body, err = fitAnswer(limit, a.Messages, out.First, set) // no more references than the note needs
	}
	return http.StatusOK, body, err
}

// toolBody is a direct call's answer whose messages are encoded already,
// and fitted to the response (see messageList).
type toolBody struct {
	turn.ToolAnswer
	Messages []json.RawMessage `json:"messages"`
}

// kindOf names the JSON type of a value that starts with c, as jsonValue
// takes it.
func kindOf(c byte) string {
	switch c {
	case '[':
		return "array"
	case '"':
		return "string"
	case 't', 'f':
		return "bool"
	}
	return "number"
}

// StructuredRequest is the body of POST /structured.
type StructuredRequest struct {
	SessionID   *string         `json:"session_id,omitempty"`
	DenyPending bool            `json:"deny_pending,omitempty"`
	Prompt      *string         `json:"prompt"`
	Schema      json.RawMessage `json:"schema"`
	Name        string          `json:"name,omitempty"`
	Description string          `json:"description,omitempty"`
}

func (h *Handler) structured(r *http.Request, rec *record) (int, []byte, error) {
	var in StructuredRequest
	req, e := h.turnRequest(r, RouteStructured, &in)
	if e != nil {
		return 0, nil, e
	}
	if req.SessionID, e = namedSession(in.SessionID, rec); e != nil {
		return 0, nil, e
	}
	if in.Prompt == nil {
		return 0, nil, badRequest("invalid_request", "prompt is required: a string")
	}
	prompt, e := content("prompt", in.Prompt, nil, h.cfg.MaxMessageBytes)
	if e != nil {
		return 0, nil, e
	}
	if len(in.Schema) == 0 || string(in.Schema) == "null" {
		return 0, nil, badRequest("invalid_schema", "schema is required: a JSON Schema whose root has \"type\": \"object\"")
	}
	if h.cfg.CompileSchema == nil {
		return 0, nil, errors.New("httpapi: Config.CompileSchema is not set, and the structured route needs it")
	}
	schema, err := h.cfg.CompileSchema(in.Schema)
	if err != nil {
		return 0, nil, err
	}
	out, err := h.cfg.Service.Structured(r.Context(), turn.Structured{
		Request:     req,
		DenyPending: in.DenyPending,
		Prompt:      prompt,
		Schema:      schema,
		Name:        in.Name,
		Description: in.Description,
	})
	return answer(out, err, rec)
}

// SessionsResponse is the answer to GET /sessions: the caller's sessions,
// newest first.
type SessionsResponse struct {
	Sessions   []SessionSummary `json:"sessions"`
	NextCursor string           `json:"next_cursor,omitempty"`
}

// SessionSummary is a session in a list.
type SessionSummary struct {
	SessionID string `json:"session_id"`
	// Title is the start of the session's first message.
	Title     string    `json:"title"`
	CreatedAt time.Time `json:"created_at"`
}

// Page sizes of GET /sessions.
const (
	DefaultListSize = 20
	MaxListSize     = turn.MaxListSize
)

func (h *Handler) listSessions(r *http.Request, _ *record) (int, []byte, error) {
	owner, e := h.owner(r)
	if e != nil {
		return 0, nil, e
	}
	limit, e := limitParam(r, DefaultListSize, MaxListSize)
	if e != nil {
		return 0, nil, e
	}
	list, err := h.cfg.Service.List(r.Context(), owner, r.URL.Query().Get("cursor"), limit)
	if err != nil {
		return 0, nil, err
	}
	out := SessionsResponse{Sessions: make([]SessionSummary, 0, len(list.Sessions)), NextCursor: list.NextCursor}
	for _, s := range list.Sessions {
		out.Sessions = append(out.Sessions, SessionSummary{SessionID: s.SessionID, Title: s.Title, CreatedAt: s.CreatedAt.UTC()})
	}
	return jsonOK(out)
}

// jsonOK is a 200 with v.
func jsonOK(v any) (int, []byte, error) {
	body, err := json.Marshal(v)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, body, nil
}

// limitParam reads the limit query parameter: a whole number from 1 to max,
// def when absent.
func limitParam(r *http.Request, def, max int) (int, *Error) {
	q := r.URL.Query()
	if !q.Has("limit") {
		return def, nil
	}
	v := q.Get("limit")
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > max || len(q["limit"]) > 1 {
		return 0, badRequest("invalid_limit", "limit=%q must be a whole number from 1 to %d", v, max)
	}
	return n, nil
}

// SessionResponse is the answer to GET /sessions/{sessionId}: one page of
// the full transcript, oldest first.
type SessionResponse struct {
	SessionID string `json:"session_id"`
	// Agent names the sub-agent whose conversation the page is of, with
	// ?agent=; absent for the main agent's.
	Agent string `json:"agent,omitempty"`
	Title string `json:"title"`
	// First is the index of the first of Messages in the session: the
	// index of message k is First+k. Messages that expired, always the
	// oldest, are left out.
	First     int                        `json:"first"`
	State     map[string]json.RawMessage `json:"state"`
	Summary   *string                    `json:"summary"`
	Window    turn.Window                `json:"window"`
	CreatedAt time.Time                  `json:"created_at"`
	UpdatedAt time.Time                  `json:"updated_at"`
	// ExpiresAt is null for a session that never expires.
	ExpiresAt *time.Time `json:"expires_at"`
	// Interrupts are what the session's last turn waits for: its live
	// interrupts, which POST /chat answers with responses.
	Interrupts []agent.Interrupt `json:"interrupts"`
	NextCursor string            `json:"next_cursor,omitempty"`
	Messages   []agent.Message   `json:"messages"`
}

// Page sizes of GET /sessions/{sessionId}.
const (
	DefaultPageSize = 100
	MaxPageSize     = turn.MaxPageSize
)

func (h *Handler) getSession(r *http.Request, rec *record) (int, []byte, error) {
	owner, id, e := h.sessionOf(r, rec)
	if e != nil {
		return 0, nil, e
	}
	limit, e := limitParam(r, DefaultPageSize, MaxPageSize)
	if e != nil {
		return 0, nil, e
	}
	q := r.URL.Query()
	var page *turn.Page
	var err error
	switch name, n := q.Get("agent"), len(q["agent"]); {
	case n > 1:
		return 0, nil, badRequest("invalid_request", "agent is given %d times; name one sub-agent", n)
	case n == 1:
		page, err = h.cfg.Service.AgentTranscript(r.Context(), owner, id, name, q.Get("cursor"), limit)
	default:
		page, err = h.cfg.Service.Transcript(r.Context(), owner, id, q.Get("cursor"), limit)
	}
	if err != nil {
		return 0, nil, err
	}
	out := SessionResponse{
		SessionID:  page.SessionID,
		Agent:      page.Agent,
		Title:      page.Title,
		First:      page.First,
		Messages:   page.Messages,
		State:      page.State,
		Window:     turn.WindowOf(page.Window),
		CreatedAt:  page.CreatedAt.UTC(),
		UpdatedAt:  page.UpdatedAt.UTC(),
		NextCursor: page.NextCursor,
	}
	if out.Messages == nil {
		out.Messages = []agent.Message{}
	}
	if out.State == nil {
		out.State = map[string]json.RawMessage{}
	}
	if out.Interrupts = page.Pending.Live(time.Now()); out.Interrupts == nil {
		out.Interrupts = []agent.Interrupt{}
	}
	if sum := page.Window.Summary; sum != "" {
		out.Summary = &sum
	}
	if !page.ExpiresAt.IsZero() {
		at := page.ExpiresAt.UTC()
		out.ExpiresAt = &at
	}
	body, err := fitPage(budget(r), page.Agent, page.Messages, page.First, page.NextCursor, turn.CursorAt, func(raws []json.RawMessage, next string) any {
		out.NextCursor = next
		return sessionBody{SessionResponse: out, Messages: raws}
	})
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, body, nil
}

// sessionBody is a transcript page whose messages are encoded already, and
// fitted to the response (see messageList).
type sessionBody struct {
	SessionResponse
	Messages []json.RawMessage `json:"messages"`
}

// fitPage encodes the body that set makes of a page's messages, stored
// from index first on in the conversation of the sub-agent agent ("" for
// the main agent's), with as many of them as fit within limit (0: no
// limit; see messageList), and the cursor of the page that follows them:
// next, when they all fit, or cursorAt the first left out.
func fitPage(limit int, agent string, msgs []agent.Message, first int, next string, cursorAt func(int) string, set func(raws []json.RawMessage, next string) any) ([]byte, error) {
	l, err := newMessageList(msgs, first)
	l.agent = agent
	if err != nil {
		return nil, err
	}
	if limit > 0 {
		// The rest is measured with the longest cursor the page may get.
		longest := next
		if c := cursorAt(first + len(msgs)); len(c) > len(longest) {
			longest = c
		}
		rest, err := restSize(func(raws []json.RawMessage) any { return set(raws, longest) })
		if err != nil {
			return nil, err
		}
		if n := l.fitPage(limit, rest); n < len(msgs) {
			l.raws, next = l.raws[:n], cursorAt(first+n)
		}
	}
	return json.Marshal(set(l.raws, next))
}

func (h *Handler) deleteSession(r *http.Request, rec *record) (int, []byte, error) {
	owner, id, e := h.sessionOf(r, rec)
	if e != nil {
		return 0, nil, e
	}
	if err := h.cfg.Service.Delete(r.Context(), owner, id); err != nil {
		return 0, nil, fmt.Errorf("%w: %w", errDeleting, err)
	}
	return http.StatusNoContent, nil, nil
}

// sessionOf returns the caller and the session a /sessions/{sessionId}
// request names.
func (h *Handler) sessionOf(r *http.Request, rec *record) (owner, id string, e *Error) {
	if owner, e = h.owner(r); e != nil {
		return "", "", e
	}
	id = r.PathValue("sessionId")
	rec.sessionID = id
	if !turn.ValidID(id) {
		return "", "", badRequest("invalid_session_id", "session id %q must be 1 to 128 letters, digits, '.', '_', ':' or '-', starting with a letter or digit", id)
	}
	return owner, id, nil
}

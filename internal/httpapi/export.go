package httpapi

import (
	"encoding/json"
	"net/http"
	"strings"

	"github.com/lambda-agent/lambda-agent/internal/turn"
)

// The session document, its format and its checks are the turn service's
// (turn.Document): GET /sessions/{sessionId}/export writes its pages, and
// POST /sessions/import and POST /sessions/{sessionId}/import take them.
// These are the API's names for its types.
type (
	// SessionDocument is the answer to GET /sessions/{sessionId}/export,
	// and the body of POST /sessions/import.
	SessionDocument = turn.Document
	// SessionDocumentPage is a later page of an export, and the body of
	// POST /sessions/{sessionId}/import.
	SessionDocumentPage = turn.DocumentPage
	// AgentDocument is a sub-agent's conversation in a session document,
	// and AgentPart its messages in a later page.
	AgentDocument = turn.AgentDocument
	AgentPart     = turn.AgentPart
)

// The format a session document declares.
const (
	DocumentFormat  = turn.DocumentFormat
	DocumentVersion = turn.DocumentVersion
)

// ImportRequest is the body of POST /sessions/import: a session document,
// whole or its first page, and the id of the session to create.
type ImportRequest struct {
	SessionDocument
	// NewSessionID is the id to create the session under. Absent, the
	// session gets a new id: derived from the Idempotency-Key when there is
	// one, so that a retry finds the session its first attempt created,
	// else random.
	NewSessionID *string `json:"new_session_id,omitempty"`
}

// MaxImportBytes bounds the body of POST /sessions/import: what a Lambda
// request (6 MB, with its event around the body) can carry. A session
// larger than this is imported in pages.
const MaxImportBytes = 5<<20 + 512<<10

// maxExportBytes bounds an export page's body as Lambda carries it (see
// lambdahttp.BodySize), on every route: a page is also the body of an
// import, which Lambda carries in 6 MB, event included.
const maxExportBytes = 5<<20 + 512<<10

func (h *Handler) exportSession(r *http.Request, rec *record) (int, []byte, error) {
	owner, id, e := h.sessionOf(r, rec)
	if e != nil {
		return 0, nil, e
	}
	page, err := h.cfg.Service.Export(r.Context(), owner, id, r.URL.Query().Get("cursor"))
	if err != nil {
		return 0, nil, err
	}
	body, err := fitExport(maxExportBytes, page)
	if err != nil {
		return 0, nil, err
	}
	return http.StatusOK, body, nil
}

// fitExport encodes an export page with as many of its messages as fit
// within limit, across its runs (see messageList.fitPage), and the cursor
// of the page that follows them.
func fitExport(limit int, page *turn.Export) ([]byte, error) {
	runs := page.Runs()
	lists := make([]*messageList, len(runs))
	all := &messageList{}
	for i, run := range runs {
		l, err := newMessageList(run.Messages, run.First)
		if err != nil {
			return nil, err
		}
		l.agent, lists[i] = run.Agent, l
		all.raws, all.sizes = append(all.raws, l.raws...), append(all.sizes, l.sizes...)
	}
	// The rest is measured with the longest cursor the page may get.
	longest := strings.Repeat("x", page.MaxCursorLen())
	rest, err := restSize(func([]json.RawMessage) any { return exportBody(page, nil, longest) })
	if err != nil {
		return nil, err
	}
	n := len(all.raws)
	if len(all.raws) > 0 {
		all.refs = make([]bool, len(all.raws))
		all.msgs, all.first, all.agent = runs[0].Messages, runs[0].First, runs[0].Agent
		n = all.fitPage(limit, rest)
		if all.refs[0] {
			lists[0].reference(0) // the message fits no page: a reference stands for it
		}
	}
	if n < len(all.raws) {
		page.Cut(n)
	}
	raws := make([][]json.RawMessage, len(lists))
	for i, run := range page.Runs() {
		raws[i] = lists[i].raws[:len(run.Messages)]
	}
	return json.Marshal(exportBody(page, raws, ""))
}

// exportBody is the body of an export page whose runs' messages are
// raws, encoded already and fitted to the response (see messageList), or
// none when raws is nil; with next for its next cursor when it is not "".
func exportBody(page *turn.Export, raws [][]json.RawMessage, next string) any {
	at := func(i int) []json.RawMessage {
		if raws == nil || raws[i] == nil {
			return []json.RawMessage{}
		}
		return raws[i]
	}
	if d := page.Document; d != nil {
		body := documentBody{Document: *d, Messages: []json.RawMessage{}}
		if next != "" {
			body.NextCursor = next
		}
		if len(d.Agents) > 0 {
			body.Agents = make(map[string]agentDocumentBody, len(d.Agents))
			for name, a := range d.Agents {
				body.Agents[name] = agentDocumentBody{AgentDocument: *a, Messages: []json.RawMessage{}}
			}
		}
		for i, run := range page.Runs() {
			if run.Agent == "" {
				body.Messages = at(i)
			} else {
				a := body.Agents[run.Agent]
				a.Messages = at(i)
				body.Agents[run.Agent] = a
			}
		}
		return body
	}
	p := page.Page
	body := pageBody{DocumentPage: *p, Messages: []json.RawMessage{}}
	if next != "" {
		body.NextCursor = next
	}
	for i, run := range page.Runs() {
		if run.Agent == "" {
			body.Messages = at(i)
			continue
		}
		if body.Agents == nil {
			body.Agents = map[string]agentPartBody{}
		}
		body.Agents[run.Agent] = agentPartBody{AgentPart: *p.Agents[run.Agent], Messages: at(i)}
	}
	return body
}

// documentBody and pageBody are the pages of an export whose messages are
// encoded already, and fitted to the response (see messageList), as are
// their sub-agents'.
type (
	documentBody struct {
		turn.Document
		Messages []json.RawMessage            `json:"messages"`
		Agents   map[string]agentDocumentBody `json:"agents,omitempty"`
	}
	agentDocumentBody struct {
		turn.AgentDocument
		Messages []json.RawMessage `json:"messages"`
	}
	pageBody struct {
		turn.DocumentPage
		Messages []json.RawMessage        `json:"messages"`
		Agents   map[string]agentPartBody `json:"agents,omitempty"`
	}
	agentPartBody struct {
		turn.AgentPart
		Messages []json.RawMessage `json:"messages"`
	}
)

func (h *Handler) importSession(r *http.Request, rec *record) (int, []byte, error) {
	owner, e := h.owner(r)
	if e != nil {
		return 0, nil, e
	}
	idem, e := idempotencyKey(r)
	if e != nil {
		return 0, nil, e
	}
	raw, e := body(r, MaxImportBytes)
	if e != nil {
		return 0, nil, e
	}
	var in ImportRequest
	if e := decodeJSON(raw, &in, "the body"); e != nil {
		return 0, nil, e
	}
	id, e := namedSession(in.NewSessionID, rec)
	if e != nil {
		return 0, nil, e
	}
	out, err := h.cfg.Service.Import(r.Context(), turn.Import{
		Request:  turn.Request{Owner: owner, SessionID: id, IdempotencyKey: idem, Fingerprint: turn.Fingerprint(RouteImportSession, raw)},
		Document: &in.SessionDocument,
	})
	return imported(out, err, rec)
}

// importPage takes a later page of an import in pages.
func (h *Handler) importPage(r *http.Request, rec *record) (int, []byte, error) {
	owner, id, e := h.sessionOf(r, rec)
	if e != nil {
		return 0, nil, e
	}
	idem, e := idempotencyKey(r)
	if e != nil {
		return 0, nil, e
	}
	token := r.URL.Query().Get("token")
	if token == "" {
		return 0, nil, badRequest("invalid_request", "token is required: the import_token the first page's answer gave")
	}
	raw, e := body(r, MaxImportBytes)
	if e != nil {
		return 0, nil, e
	}
	var page SessionDocumentPage
	if e := decodeJSON(raw, &page, "the body"); e != nil {
		return 0, nil, e
	}
	out, err := h.cfg.Service.ImportPage(r.Context(), turn.ImportPage{
		Request: turn.Request{Owner: owner, SessionID: id, IdempotencyKey: idem},
		Token:   token,
		Page:    &page,
	})
	return imported(out, err, rec)
}

// imported answers an import request: 201 with the session's Location for
// a complete import, 202 for a page of an import in pages that is not
// its last.
func imported(out *turn.Outcome[turn.ImportAnswer], err error, rec *record) (int, []byte, error) {
	_, body, err := answer(out, err, rec)
	if err != nil {
		return 0, nil, err
	}
	rec.result = nil // no model, no tools: nothing to count
	rec.sessionID = out.Answer.SessionID
	if !out.Answer.Complete() {
		return http.StatusAccepted, body, nil
	}
	rec.location = "/sessions/" + out.Answer.SessionID
	return http.StatusCreated, body, nil
}

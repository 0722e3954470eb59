package httpapi

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/lambda-agent/lambda-agent/internal/ddbhistory"
	"github.com/lambda-agent/lambda-agent/internal/lambdahttp"
)

// The audit routes: a session's audit record in pages, and one record.
const (
	RouteAudit       = "GET /sessions/{sessionId}/audit"
	RouteAuditRecord = "GET /sessions/{sessionId}/audit/{recordId}"
)

// Page sizes of GET /sessions/{sessionId}/audit.
const (
	DefaultAuditPageSize = 20
	MaxAuditPageSize     = 100
)

// Page budgets of the audit record, in bytes of the records' JSON: a
// buffered answer's keeps its body within Lambda's 6 MB as
// lambdahttp.BodySize counts it, whose escaping can take a record's JSON
// to four times its size; a streamed one's bounds the page all the same.
const (
	auditBufferedBudget = lambdahttp.MaxBodyBytes / 5
	auditStreamBudget   = 4 << 20
)

// AuditResponse is the answer to GET /sessions/{sessionId}/audit.
type AuditResponse struct {
	SessionID  string        `json:"session_id"`
	Records    []AuditRecord `json:"records"`
	NextCursor string        `json:"next_cursor,omitempty"`
}

// AuditRecord is a model call's record in an answer: what it is, and the
// record (internal/audit's Record), or, when it is too large for a page,
// where to read it alone.
type AuditRecord struct {
	ID string `json:"id"`
	// At is the index of the first message of the turn the call was made
	// in; Turn tells the turns apart, and Call is the call's number in
	// its turn, from 1.
	At      int    `json:"at"`
	Turn    string `json:"turn"`
	Call    int    `json:"call"`
	Outcome string `json:"outcome"`
	// Bytes is the size of the record's JSON.
	Bytes      int       `json:"bytes"`
	RecordedAt time.Time `json:"recorded_at"`
	// Record is the record; absent when it is too large for the page,
	// which Href then reads alone.
	Record json.RawMessage `json:"record,omitempty"`
	Href   string          `json:"href,omitempty"`
}

func auditRecordOf(id string, r *ddbhistory.AuditRecord) AuditRecord {
	out := AuditRecord{ID: r.ID, At: r.At, Turn: r.Turn, Call: r.Call, Outcome: string(r.Outcome), Bytes: r.Size, RecordedAt: r.Recorded, Record: r.JSON}
	if r.JSON == nil {
		out.Href = "/sessions/" + id + "/audit/" + r.ID
	}
	return out
}

func (h *Handler) getAudit(r *http.Request, rec *record) (int, []byte, error) {
	owner, id, e := h.sessionOf(r, rec)
	if e != nil {
		return 0, nil, e
	}
	limit, e := limitParam(r, DefaultAuditPageSize, MaxAuditPageSize)
	if e != nil {
		return 0, nil, e
	}
	limitBytes := budget(r)
	pageBudget := auditStreamBudget
	if limitBytes > 0 {
		pageBudget = auditBufferedBudget
	}
	page, err := h.cfg.Service.Audit(r.Context(), owner, id, r.URL.Query().Get("cursor"), limit, pageBudget)
	if err != nil {
		return 0, nil, err
	}
	out := AuditResponse{SessionID: id, Records: make([]AuditRecord, 0, len(page.Records)), NextCursor: page.NextCursor}
	for i := range page.Records {
		out.Records = append(out.Records, auditRecordOf(id, &page.Records[i]))
	}
	body, err := json.Marshal(out)
	// A page of records whose JSON escapes unusually much is held to the
	// answer's limit too: its largest records are read alone instead.
	for err == nil && limitBytes > 0 && lambdahttp.BodySize(body) > limitBytes {
		largest := -1
		for i, r := range out.Records {
			if r.Record != nil && (largest < 0 || len(r.Record) > len(out.Records[largest].Record)) {
				largest = i
			}
		}
		if largest < 0 {
			break
		}
		out.Records[largest].Record, out.Records[largest].Href = nil, "/sessions/"+id+"/audit/"+out.Records[largest].ID
		body, err = json.Marshal(out)
	}
	return http.StatusOK, body, err
}

func (h *Handler) getAuditRecord(r *http.Request, rec *record) (int, []byte, error) {
	owner, id, e := h.sessionOf(r, rec)
	if e != nil {
		return 0, nil, e
	}
	got, err := h.cfg.Service.AuditRecord(r.Context(), owner, id, r.PathValue("recordId"))
	if err != nil {
		return 0, nil, err
	}
	body, err := json.Marshal(auditRecordOf(id, got))
	if err == nil && budget(r) > 0 && lambdahttp.BodySize(body) > budget(r) {
		return 0, nil, &Error{Code: "too_large", Message: "the record is too large for an answer of the HTTP API, which Lambda carries in 6 MB: read it through the stream function's URL, which streams", err: err}
	}
	return http.StatusOK, body, err
}

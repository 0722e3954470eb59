package httpapi_test

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/url"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/lambda-agent/lambda-agent/internal/audit"
	"github.com/lambda-agent/lambda-agent/internal/httpapi"
	"github.com/lambda-agent/lambda-agent/internal/lambdahttp"
)

// The promises of docs/audit.md's Routes section, held to the chat
// function as the HTTP API invokes it (buffered, through lambdahttp) and to
// the stream function's URL (streamed).

// auditOn keeps the audit record, of messages up to 2 MB: a turn's record
// can then be larger than a page of the HTTP API, or than its answer.
var auditOn = map[string]string{"AUDIT": "on", "MAX_MESSAGE_BYTES": "2000000"}

// auditPage is an answer of GET /sessions/{sessionId}/audit, read back
// strictly.
type auditPage struct {
	SessionID  string        `json:"session_id"`
	Records    []auditRecord `json:"records"`
	NextCursor string        `json:"next_cursor"`
}

// auditRecord is httpapi.AuditRecord with its record decoded.
type auditRecord struct {
	httpapi.AuditRecord
	Record *audit.Record `json:"record"`
}

// prompt is the text of the last user message a record's request sent.
func (r *auditRecord) prompt() string {
	if r.Record == nil || len(r.Record.Request.Messages) == 0 {
		return ""
	}
	return r.Record.Request.Messages[len(r.Record.Request.Messages)-1].Text()
}

// chatPlain runs a turn of session through the local run's kind of
// handler, plain HTTP, which bounds no answer: the turns here send
// messages too large for the HTTP API's answers, which is not what these
// tests are about.
func (a *api) chatPlain(t *testing.T, session, message string) {
	t.Helper()
	body, err := json.Marshal(map[string]string{"session_id": session, "message": message})
	if err != nil {
		t.Fatal(err)
	}
	if status, raw := a.Call("POST", "/chat", "", string(body)); status != 200 {
		t.Fatalf("the turn of %s: %d %.300s", session, status, raw)
	}
}

// auditAPI sends GET /sessions/{session}/audit, or, with a record id,
// GET /sessions/{session}/audit/{record}, with query, to the chat function
// as the HTTP API invokes it, and returns its answer: the invocation's
// response is held to Lambda's 6 MB.
func (a *api) auditAPI(t *testing.T, session, record string, query url.Values) response {
	t.Helper()
	_, r := a.invokeRawWith(t, request{route: "session-get.json", session: session}, func(e *events.APIGatewayV2HTTPRequest) {
		route, path := httpapi.RouteAudit, "/sessions/"+session+"/audit"
		if record != "" {
			route, path = httpapi.RouteAuditRecord, path+"/"+record
			e.PathParameters["recordId"] = record
		}
		e.RouteKey, e.RequestContext.RouteKey = route, route
		e.RawPath, e.RequestContext.HTTP.Path = path, path
		e.RawQueryString, e.QueryStringParameters = query.Encode(), nil
		if len(query) > 0 {
			e.QueryStringParameters = map[string]string{}
			for k := range query {
				e.QueryStringParameters[k] = query.Get(k)
			}
		}
	})
	return r
}

// auditURL sends GET path to the stream function's URL, as the function
// serves it (lambdahttp.WrapURL, which streams), and returns the status
// and the body.
func (a *api) auditURL(t *testing.T, path string) (int, []byte) {
	t.Helper()
	fn := lambdahttp.WrapURL(a.handler(t, httpapi.FunctionURLRoutes))
	p, query, _ := strings.Cut(path, "?")
	resp, err := fn(t.Context(), &events.LambdaFunctionURLRequest{
		Version: "2.0", RawPath: p, RawQueryString: query,
		RequestContext: events.LambdaFunctionURLRequestContext{
			RequestID: "r1", DomainName: "abc.lambda-url.us-east-1.on.aws",
			HTTP: events.LambdaFunctionURLRequestContextHTTPDescription{Method: "GET", Path: p},
		},
	})
	if err != nil {
		t.Fatalf("GET %s through the function URL: %v", path, err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, body
}

// decodePage reads an audit page strictly: nothing but the documented
// fields.
func decodePage(t *testing.T, raw []byte) auditPage {
	t.Helper()
	var p auditPage
	strictDecode(t, raw, &p)
	return p
}

// randomText is n bytes of base64 that DEFLATE cannot shrink much and JSON
// does not escape.
func randomText(n int) string {
	raw := make([]byte, n*3/4)
	_, _ = rand.Read(raw)
	return base64.StdEncoding.EncodeToString(raw)
}

// TestAuditRecordLargerThanAPage: on the HTTP API a page holds at most
// 1.2 MB of records: a record larger than that is listed without its
// record, with an href to GET /sessions/{sessionId}/audit/{recordId},
// which answers it whole, while the records beside it come whole in the
// page. The stream function's URL, whose pages hold 4 MB, lists it whole.
func TestAuditRecordLargerThanAPage(t *testing.T) {
	// A window of two messages: the turn after the large one sends it no
	// more, and its record is small again.
	a := newAPI(t, map[string]string{"AUDIT": "on", "MAX_MESSAGE_BYTES": "2000000", "WINDOW_SIZE": "2"})
	const session = "big-page"
	big := randomText(1_300_000) // over the 1.2 MB a page holds, as BodySize counts it too
	for _, m := range []string{"before", big, "after"} {
		a.chatPlain(t, session, m)
	}

	r := a.auditAPI(t, session, "", nil)
	if r.status != 200 {
		t.Fatalf("the page: %d %.300s", r.status, r.raw)
	}
	page := decodePage(t, []byte(r.raw))
	if len(page.Records) != 3 || page.NextCursor != "" || page.SessionID != session {
		t.Fatalf("the page: session %q, %d records, next %q; want the 3 turns' in one page", page.SessionID, len(page.Records), page.NextCursor)
	}
	for i, want := range []string{"before", "", "after"} {
		rec := page.Records[i]
		if got := rec.prompt(); got != want || (want == "") != (rec.Href != "") {
			t.Errorf("record %d (%s, %d bytes): prompt of %d bytes, href %q; want the record whole, or an href for the large one", i, rec.ID, rec.Bytes, len(got), rec.Href)
		}
	}
	large := page.Records[1]
	if want := "/sessions/" + session + "/audit/" + large.ID; large.Href != want || large.Bytes <= len(big) {
		t.Fatalf("the large record: href %q, %d bytes; want %q and more than the %d bytes of its message", large.Href, large.Bytes, want, len(big))
	}

	// Its href, on the HTTP API, answers it whole.
	one := a.auditAPI(t, session, large.ID, nil)
	var got auditRecord
	strictDecode(t, []byte(one.raw), &got)
	if one.status != 200 || got.prompt() != big || got.Href != "" || got.ID != large.ID || got.Bytes != large.Bytes {
		t.Errorf("GET %s: %d, id %s, %d bytes, href %q, a prompt of %d bytes; want the record whole", large.Href, one.status, got.ID, got.Bytes, got.Href, len(got.prompt()))
	}
	if raw, _ := json.Marshal(got.Record); len(raw) != large.Bytes {
		t.Errorf("the record's JSON is %d bytes; the page says %d", len(raw), large.Bytes)
	}

	// The stream function's URL lists it whole.
	status, raw := a.auditURL(t, "/sessions/"+session+"/audit")
	if status != 200 {
		t.Fatalf("the page through the function URL: %d %.300s", status, raw)
	}
	if p := decodePage(t, raw); len(p.Records) != 3 || p.Records[1].prompt() != big || p.Records[1].Href != "" {
		t.Errorf("the page through the function URL does not hold the large record whole: %d records", len(p.Records))
	}
}

// TestAuditRecordTooLargeForTheHTTPAPI: a record too large for Lambda's
// 6 MB answer, as the response event counts it, is a 413 too_large on the
// HTTP API, whose page lists it with an href; the stream function's URL,
// which streams, answers it whole, by itself and in a page.
func TestAuditRecordTooLargeForTheHTTPAPI(t *testing.T) {
	a := newAPI(t, auditOn)
	const session = "huge"
	// 1.6 MB that JSON escapes, and the response event escapes again:
	// 6.4 MB in the event.
	huge := escapes(1_600_000)
	a.chatPlain(t, session, huge)

	r := a.auditAPI(t, session, "", nil)
	page := decodePage(t, []byte(r.raw))
	if r.status != 200 || len(page.Records) != 1 {
		t.Fatalf("the page: %d, %d records", r.status, len(page.Records))
	}
	rec := page.Records[0]
	if rec.Record != nil || rec.Href != "/sessions/"+session+"/audit/"+rec.ID {
		t.Fatalf("the page lists the record with %d bytes of it, href %q; want none, and its href", len(rec.prompt()), rec.Href)
	}

	one := a.auditAPI(t, session, rec.ID, nil)
	if one.status != 413 || one.errorCode() != "too_large" || one.errorMessage() == "" {
		t.Errorf("GET %s on the HTTP API: %d %.300s; want 413 too_large", rec.Href, one.status, one.raw)
	}

	status, raw := a.auditURL(t, rec.Href)
	var got auditRecord
	strictDecode(t, raw, &got)
	if status != 200 || got.prompt() != huge || got.ID != rec.ID {
		t.Errorf("GET %s through the function URL: %d, id %s, a prompt of %d bytes; want the record whole", rec.Href, status, got.ID, len(got.prompt()))
	}
	if n := lambdahttp.BodySize(raw); n <= lambdahttp.MaxBodyBytes {
		t.Errorf("the record takes %d bytes in a response event; the test needs one over the %d an answer may take", n, lambdahttp.MaxBodyBytes)
	}
	status, raw = a.auditURL(t, "/sessions/"+session+"/audit")
	if p := decodePage(t, raw); status != 200 || len(p.Records) != 1 || p.Records[0].prompt() != huge {
		t.Errorf("the page through the function URL: %d, %d records; want the record whole", status, len(p.Records))
	}
}

// TestAuditBadRequests: a bad limit, cursor or session id is a 400 with its
// code, on the page and on the route of one record, and a record id that
// names no record is a 404 not_found.
func TestAuditBadRequests(t *testing.T) {
	a := newAPI(t, auditOn)
	a.chatPlain(t, "audited", "hello")
	notAudit := base64.RawURLEncoding.EncodeToString([]byte("m#0000000001")) // a message's key, not a record's
	tests := []struct {
		name            string
		session, record string
		query           url.Values
		status          int
		code            string
	}{
		{"limit 0", "audited", "", url.Values{"limit": {"0"}}, 400, "invalid_limit"},
		{"limit over the maximum", "audited", "", url.Values{"limit": {"101"}}, 400, "invalid_limit"},
		{"limit not a number", "audited", "", url.Values{"limit": {"ten"}}, 400, "invalid_limit"},
		{"limit empty", "audited", "", url.Values{"limit": {""}}, 400, "invalid_limit"},
		{"cursor not base64", "audited", "", url.Values{"cursor": {"not a cursor!"}}, 400, "invalid_request"},
		{"cursor of another key", "audited", "", url.Values{"cursor": {notAudit}}, 400, "invalid_request"},
		{"cursor of an unknown session", "no-such-session", "", url.Values{"cursor": {"x"}}, 400, "invalid_request"},
		{"session id", "-starts-with-a-dash", "", nil, 400, "invalid_session_id"},
		{"session id too long", strings.Repeat("s", 129), "", nil, 400, "invalid_session_id"},
		{"session id of a record", "has space", "0.0000000000000000000.1", nil, 400, "invalid_session_id"},
		{"record id", "audited", "not-a-record", nil, 404, "not_found"},
		{"record id of no record", "audited", "0.0000000000000000000.1", nil, 404, "not_found"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := a.auditAPI(t, tt.session, tt.record, tt.query)
			if r.status != tt.status || r.errorCode() != tt.code || r.errorMessage() == "" {
				t.Errorf("%d %.300s; want %d %s", r.status, r.raw, tt.status, tt.code)
			}
		})
	}
	// The limits themselves are fine.
	for _, limit := range []string{"1", "100"} {
		if r := a.auditAPI(t, "audited", "", url.Values{"limit": {limit}}); r.status != 200 {
			t.Errorf("limit=%s: %d %.300s", limit, r.status, r.raw)
		}
	}
}

// TestAuditOffOnTheHTTPAPI: with AUDIT off, both routes answer 404
// audit_off for every session, the caller's, one that does not exist and
// through the function URL too.
func TestAuditOffOnTheHTTPAPI(t *testing.T) {
	a := newAPI(t, nil)
	a.chatPlain(t, "unaudited", "hello")
	for _, c := range []struct{ session, record string }{
		{"unaudited", ""},
		{"unaudited", "0.0000000000000000000.1"},
		{"no-such-session", ""},
		{"no-such-session", "0.0000000000000000000.1"},
	} {
		r := a.auditAPI(t, c.session, c.record, nil)
		if r.status != 404 || r.errorCode() != "audit_off" || !strings.Contains(r.errorMessage(), "AUDIT=on") {
			t.Errorf("session %s, record %q on the HTTP API: %d %.300s; want 404 audit_off", c.session, c.record, r.status, r.raw)
		}
		path := "/sessions/" + c.session + "/audit"
		if c.record != "" {
			path += "/" + c.record
		}
		status, raw := a.auditURL(t, path)
		if status != 404 || !strings.Contains(string(raw), `"audit_off"`) {
			t.Errorf("GET %s through the function URL: %d %.300s; want 404 audit_off", path, status, raw)
		}
	}
}

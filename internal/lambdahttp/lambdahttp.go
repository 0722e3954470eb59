package lambdahttp

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"
)

// Handler is a function's handler for HTTP API events, as lambda.Start
// takes it.
type Handler func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error)

type contextKey struct{}

// RequestFromContext returns the event a request made by Wrap came from.
func RequestFromContext(ctx context.Context) (*events.APIGatewayV2HTTPRequest, bool) {
	ev, ok := ctx.Value(contextKey{}).(*events.APIGatewayV2HTTPRequest)
	return ev, ok
}

// Wrap returns a Lambda handler that serves each event with h. It never
// returns an error: what h writes is the response, and a request that
// cannot be made from the event is one whose body fails to read, so that h
// answers it as it answers any unreadable body.
func Wrap(h http.Handler) Handler {
	return func(ctx context.Context, ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
		w := NewResponseWriter()
		h.ServeHTTP(w, Request(ctx, &ev))
		return w.Response(), nil
	}
}

// Request returns the http.Request that ev stands for, under ctx, which
// also carries ev (see RequestFromContext).
//
// The path is the route's, with its parameters filled in, when ev has a
// route key such as "GET /sessions/{sessionId}": API Gateway matched it
// already, and the raw path may carry a stage or a base path that the
// handler knows nothing of. Each parameter fills its own segment, whatever
// it holds: API Gateway gives it decoded, so that it may hold a slash or be
// a dot segment, and the URL's escaped path (its RawPath) escapes those, so
// that a ServeMux matches the event's route and its PathValue is the
// parameter as given. Otherwise (the $default route, an event written by
// hand) it is the raw path. A base64 body is decoded; one that is not
// valid base64 fails when the handler reads it.
//
// It takes the event as it is, never failing: a method or path that no
// route has is the handler's to answer.
func Request(ctx context.Context, ev *events.APIGatewayV2HTTPRequest) *http.Request {
	method := ev.RequestContext.HTTP.Method
	path, rawPath := routePath(ev)
	if m, _, ok := strings.Cut(ev.RouteKey, " "); ok && method == "" {
		method = m
	}
	// The query is the parameters API Gateway parsed, as the handler has
	// always read them (repeated names joined by commas); the raw string
	// only for an event without them.
	u := &url.URL{Path: path, RawPath: rawPath, RawQuery: ev.RawQueryString}
	if len(ev.QueryStringParameters) > 0 {
		q := url.Values{}
		for k, v := range ev.QueryStringParameters {
			q.Set(k, v)
		}
		u.RawQuery = q.Encode()
	}
	r := eventRequest(context.WithValue(ctx, contextKey{}, ev), method, u, ev.Body, ev.IsBase64Encoded,
		len(ev.Headers), ev.RequestContext.HTTP.SourceIP, ev.RequestContext.DomainName)
	for k, v := range ev.Headers {
		r.Header.Set(k, v)
	}
	for _, c := range ev.Cookies {
		r.Header.Add("Cookie", c)
	}
	return r
}

// eventRequest is the http.Request of an event, under ctx: method on u,
// with the event's body, decoded when base64Encoded, from remoteAddr to
// host. Its Header, sized for headers, is the caller's to fill.
func eventRequest(ctx context.Context, method string, u *url.URL, body string, base64Encoded bool, headers int, remoteAddr, host string) *http.Request {
	r := (&http.Request{
		Method:     method,
		URL:        u,
		Proto:      "HTTP/1.1",
		ProtoMajor: 1,
		ProtoMinor: 1,
		Header:     make(http.Header, headers),
		Body:       io.NopCloser(eventBody(body, base64Encoded)),
		RequestURI: u.RequestURI(),
		RemoteAddr: remoteAddr,
		Host:       host,
	}).WithContext(ctx)
	if !base64Encoded {
		r.ContentLength = int64(len(body))
	}
	return r
}

// routePath returns the path ev's route matched, and that path escaped
// with each parameter in one segment; or its raw path, and "" for the
// escaping url.URL gives it.
func routePath(ev *events.APIGatewayV2HTTPRequest) (path, escaped string) {
	_, pattern, ok := strings.Cut(ev.RouteKey, " ")
	if !ok {
		return rawPath(ev), ""
	}
	path, escaped, ok = fillPattern(pattern, func(name string) (string, bool) {
		v, ok := ev.PathParameters[name]
		return v, ok
	})
	if !ok {
		return rawPath(ev), ""
	}
	return path, escaped
}

// fillPattern fills the parameters of a path pattern such as
// /sessions/{sessionId} with the values param gives, and returns the path
// and the path escaped with each parameter in one segment. It fails (ok is
// false) for a pattern with a greedy parameter, which has no fixed shape,
// and for a parameter that param does not know.
func fillPattern(pattern string, param func(name string) (string, bool)) (path, escaped string, ok bool) {
	if pattern == "" || strings.Contains(pattern, "+}") {
		return "", "", false
	}
	var b, e strings.Builder
	for pattern != "" {
		before, rest, found := strings.Cut(pattern, "{")
		b.WriteString(before)
		e.WriteString((&url.URL{Path: before}).EscapedPath())
		if !found {
			break
		}
		name, after, _ := strings.Cut(rest, "}")
		v, ok := param(name)
		if !ok {
			return "", "", false
		}
		b.WriteString(v)
		e.WriteString(escapeParameter(v))
		pattern = after
	}
	return b.String(), e.String(), true
}

// escapeParameter escapes a path parameter to stand in one segment: a
// slash is %2F, and a dot segment, which url.PathEscape leaves as it is, is
// spelled with %2E, which no path cleaning takes for one.
func escapeParameter(v string) string {
	switch v {
	case ".":
		return "%2E"
	case "..":
		return "%2E%2E"
	}
	return url.PathEscape(v)
}

func rawPath(ev *events.APIGatewayV2HTTPRequest) string {
	if ev.RawPath != "" {
		return ev.RawPath
	}
	return ev.RequestContext.HTTP.Path
}

// errReader is a body that cannot be read.
type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// ResponseWriter collects a handler's response for the event's answer.
type ResponseWriter struct {
	header http.Header
	status int
	body   bytes.Buffer
}

var _ http.ResponseWriter = (*ResponseWriter)(nil)

// NewResponseWriter returns an empty ResponseWriter.
func NewResponseWriter() *ResponseWriter { return &ResponseWriter{header: http.Header{}} }

// Header implements http.ResponseWriter.
func (w *ResponseWriter) Header() http.Header { return w.header }

// WriteHeader implements http.ResponseWriter.
func (w *ResponseWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
}

// Write implements http.ResponseWriter.
func (w *ResponseWriter) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.body.Write(p)
}

// Response returns what was written, as the event's answer. A body that is
// not UTF-8 text is sent base64-encoded, as API Gateway requires.
func (w *ResponseWriter) Response() events.APIGatewayV2HTTPResponse {
	resp := events.APIGatewayV2HTTPResponse{StatusCode: w.status, Headers: map[string]string{}}
	if resp.StatusCode == 0 {
		resp.StatusCode = http.StatusOK
	}
	for k, v := range w.header {
		if k == "Set-Cookie" {
			resp.Cookies = v
			continue
		}
		resp.Headers[k] = strings.Join(v, ",")
	}
	if b := w.body.Bytes(); utf8.Valid(b) {
		resp.Body = string(b)
	} else {
		resp.Body, resp.IsBase64Encoded = base64.StdEncoding.EncodeToString(b), true
	}
	return resp
}

// eventBody is an event's body: as it is, or decoded from base64, or a
// reader that fails with why it is not base64.
func eventBody(body string, base64Encoded bool) io.Reader {
	if !base64Encoded {
		return strings.NewReader(body)
	}
	b, err := base64.StdEncoding.DecodeString(body)
	if err != nil {
		return errReader{fmt.Errorf("the body is marked base64 but is not valid base64: %w", err)}
	}
	return bytes.NewReader(b)
}

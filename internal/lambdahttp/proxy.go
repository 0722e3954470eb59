package lambdahttp

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"sync"

	"github.com/aws/aws-lambda-go/events"
)

type proxyKey struct{}

// ProxyRequestFromContext returns the REST API event a request made by
// ProxyRequest came from.
func ProxyRequestFromContext(ctx context.Context) (*events.APIGatewayProxyRequest, bool) {
	ev, ok := ctx.Value(proxyKey{}).(*events.APIGatewayProxyRequest)
	return ev, ok
}

// ProxyRequest returns the http.Request that ev, a REST API's proxy event
// (payload format 1.0), stands for, under ctx, which also carries ev (see
// ProxyRequestFromContext).
//
// The path is the resource's, such as /sessions/{sessionId}, with its
// parameters filled in, each in its own segment as Request fills a route's:
// the event's own path carries the stage or a custom domain's base path,
// which the handler knows nothing of. A REST API passes path parameters as
// the client encoded them (an HTTP API decodes them), so each is decoded
// first, and one that does not decode is taken as it is. A greedy resource
// ({proxy+}) has no fixed shape; its request gets the event's path. The
// query and the headers are the multi-valued ones when the event has them.
// A base64 body is decoded; one that is not valid base64 fails when the
// handler reads it.
//
// Like Request, it takes the event as it is, never failing.
func ProxyRequest(ctx context.Context, ev *events.APIGatewayProxyRequest) *http.Request {
	path, rawPath, ok := fillPattern(ev.Resource, func(name string) (string, bool) {
		v, ok := ev.PathParameters[name]
		if !ok {
			return "", false
		}
		if d, err := url.PathUnescape(v); err == nil {
			v = d
		}
		return v, true
	})
	if !ok {
		path, rawPath = ev.Path, ""
	}
	u := &url.URL{Path: path, RawPath: rawPath}
	q := url.Values{}
	for k, vs := range ev.MultiValueQueryStringParameters {
		q[k] = slices.Clone(vs)
	}
	for k, v := range ev.QueryStringParameters {
		if _, ok := q[k]; !ok {
			q.Set(k, v)
		}
	}
	u.RawQuery = q.Encode()
	r := eventRequest(context.WithValue(ctx, proxyKey{}, ev), ev.HTTPMethod, u, ev.Body, ev.IsBase64Encoded,
		len(ev.Headers), ev.RequestContext.Identity.SourceIP, ev.RequestContext.DomainName)
	for k, vs := range ev.MultiValueHeaders {
		for _, v := range vs {
			r.Header.Add(k, v)
		}
	}
	for k, v := range ev.Headers {
		if _, ok := r.Header[http.CanonicalHeaderKey(k)]; !ok {
			r.Header.Set(k, v)
		}
	}
	return r
}

// StreamOptions configure WrapProxyStream and WrapStream.
type StreamOptions struct {
	// AllowedOrigins are the browser origins that may read the answers to
	// REST API events (CORS), such as https://chat.example.com. A REST
	// API passes a Lambda proxy's headers as they are, so the function
	// adds Access-Control-Allow-Origin itself, to an answer to a request
	// whose Origin is one of these. HTTP APIs and function URLs answer
	// CORS themselves, from their own configuration.
	AllowedOrigins []string
}

// WrapProxyStream returns a handler that serves each REST API event with h
// and streams what h writes, for a REST API method whose integration's
// response transfer mode is STREAM. The answer's status and headers go
// first, once h writes its first byte, flushes or returns.
func WrapProxyStream(h http.Handler, opts StreamOptions) func(context.Context, *events.APIGatewayProxyRequest) (*events.APIGatewayProxyStreamingResponse, error) {
	return func(ctx context.Context, ev *events.APIGatewayProxyRequest) (*events.APIGatewayProxyStreamingResponse, error) {
		r := ProxyRequest(ctx, ev)
		header, body := serveStream(h, r)
		if origin := r.Header.Get("Origin"); origin != "" && slices.Contains(opts.AllowedOrigins, origin) {
			header.h.Set("Access-Control-Allow-Origin", origin)
			header.h.Set("Access-Control-Expose-Headers", "retry-after")
			header.h.Add("Vary", "Origin")
		}
		resp := &events.APIGatewayProxyStreamingResponse{StatusCode: header.status, Body: body}
		for k, vs := range header.h {
			if len(vs) == 1 {
				if resp.Headers == nil {
					resp.Headers = map[string]string{}
				}
				resp.Headers[k] = vs[0]
				continue
			}
			if resp.MultiValueHeaders == nil {
				resp.MultiValueHeaders = map[string][]string{}
			}
			resp.MultiValueHeaders[k] = vs
		}
		return resp, nil
	}
}

// sentHeader is what a streamed answer begins with.
type sentHeader struct {
	status int
	h      http.Header
}

// serveStream runs h on r in a goroutine and returns the status and headers
// it answers with, once it has written its first byte, flushed or
// returned, and the body it goes on writing. A handler that panics ends the
// body with an error, which the runtime reports as the invocation's.
func serveStream(h http.Handler, r *http.Request) (sentHeader, io.ReadCloser) {
	pr, pw := io.Pipe()
	w := &streamWriter{header: http.Header{}, body: pw, ready: make(chan sentHeader, 1)}
	go func() {
		defer func() {
			if v := recover(); v != nil {
				w.writeHeader(http.StatusInternalServerError)
				pw.CloseWithError(fmt.Errorf("lambdahttp: the handler panicked: %v", v))
				return
			}
			w.writeHeader(http.StatusOK) // a handler that wrote nothing answers 200
			pw.Close()
		}()
		h.ServeHTTP(w, r)
	}()
	return <-w.ready, pr
}

// streamWriter is the http.ResponseWriter of a streamed answer: the header
// is sent once, on the first write, flush or WriteHeader, and each write
// goes straight to the body, which Lambda streams as it is read.
type streamWriter struct {
	header http.Header
	body   io.Writer
	once   sync.Once
	ready  chan sentHeader
}

var (
	_ http.ResponseWriter = (*streamWriter)(nil)
	_ http.Flusher        = (*streamWriter)(nil)
)

// Header implements http.ResponseWriter.
func (w *streamWriter) Header() http.Header { return w.header }

// WriteHeader implements http.ResponseWriter.
func (w *streamWriter) WriteHeader(status int) { w.writeHeader(status) }

// Write implements http.ResponseWriter.
func (w *streamWriter) Write(p []byte) (int, error) {
	w.writeHeader(http.StatusOK)
	return w.body.Write(p)
}

// Flush implements http.Flusher: what was written is already on its way,
// so a flush only sends the header, if it is not sent yet.
func (w *streamWriter) Flush() { w.writeHeader(http.StatusOK) }

func (w *streamWriter) writeHeader(status int) {
	w.once.Do(func() { w.ready <- sentHeader{status: status, h: w.header.Clone()} })
}

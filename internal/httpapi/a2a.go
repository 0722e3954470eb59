package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"runtime/debug"
	"time"

	"bytes"
	"io"

	a2apb "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"
	"github.com/lambda-agent/lambda-agent/internal/a2a"
	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/lambdahttp"
)

// A2A's routes: the agent card, and the JSON-RPC endpoint.
const (
	RouteAgentCard = "GET /.well-known/agent-card.json"
	RouteA2A       = "POST /a2a"
)

// a2aKeepAlive is how often a streamed task that sends nothing else sends
// a comment, so that no proxy on the way takes it for dead.
const a2aKeepAlive = 15 * time.Second

// newA2A returns the handler of POST /a2a: the A2A SDK's JSON-RPC handler
// over internal/a2a's, which runs turns on the Handler's service.
func (h *Handler) newA2A() (http.Handler, error) {
	a, err := a2a.New(a2a.Config{
		Service:    h.cfg.Service,
		CheckInput: func(in []agent.ContentBlock) error { return asError(checkInput(in, h.cfg.MaxMessageBytes)) },
		Describe: func(err error) a2a.Problem {
			e := errorFor(err)
			return a2a.Problem{Code: e.Code, Status: e.Status(), Message: e.Message}
		},
	})
	if err != nil {
		return nil, err
	}
	return a2asrv.NewJSONRPCHandler(a,
		a2asrv.WithTransportKeepAlive(a2aKeepAlive),
		a2asrv.WithTransportPanicHandler(func(v any) error {
			return fmt.Errorf("%w: panic: %v\n%s", a2apb.ErrInternalError, v, debug.Stack())
		}),
	), nil
}

// asError is e as an error: nil for none, rather than a nil *Error.
func asError(e *Error) error {
	if e == nil {
		return nil
	}
	return e
}

// a2aRun serves POST /a2a: A2A's JSON-RPC methods (internal/a2a), for the
// caller of the request, whose body is bounded as every turn's. A refusal
// before the JSON-RPC request is read keeps its status and JSON body;
// after, an error is JSON-RPC's, in a 200 answer or the stream.
func (h *Handler) a2aRun(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	rec := &record{}
	status := 0
	call := &a2a.Call{}
	defer func() {
		if v := recover(); v != nil {
			rec.err = fmt.Errorf("panic: %v\n%s", v, debug.Stack())
			if status == 0 {
				status = writeError(w, internalError(), rec)
			}
		}
		h.log(r, status, rec, time.Since(start))
	}()
	owner, e := h.owner(r)
	if e != nil {
		status = writeError(w, e, rec)
		return
	}
	raw, e := body(r, h.bodyLimit())
	if e != nil {
		status = writeError(w, e, rec)
		return
	}
	call.Owner = owner
	r = r.WithContext(a2a.WithCall(r.Context(), call))
	r.Body = io.NopCloser(bytes.NewReader(raw))
	sw := &statusWriter{ResponseWriter: w}
	h.a2a.ServeHTTP(sw, r)
	status = sw.status()
	rec.sessionID, rec.result, rec.replayed = call.SessionID, call.Result, call.Replayed
	rec.outcome = "ok"
	if call.Err != nil {
		e := a2aError(call.Err)
		rec.outcome, rec.errorStatus, rec.err = e.Code, e.Status(), call.Err
		rec.noteCost(call.Err)
	}
}

// a2aError is the error a request to POST /a2a failed with, as the HTTP
// API would answer it: an A2A error carries its code in its details.
func a2aError(err error) *Error {
	var ae *a2apb.Error
	if errors.As(err, &ae) {
		if code, ok := ae.Details["code"].(string); ok {
			return &Error{Code: code, Message: ae.Message, err: err}
		}
	}
	return errorFor(err)
}

// statusWriter notes the status a handler answered with; it passes
// Flush on, for the stream.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(p []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.ResponseWriter.Write(p)
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *statusWriter) status() int {
	if w.code == 0 {
		return http.StatusOK
	}
	return w.code
}

// agentCard serves GET /.well-known/agent-card.json: the card, whose
// interface is A2A_PUBLIC_URL or POST /a2a where the request came, and
// whose security is the request's.
func (h *Handler) agentCard(r *http.Request, _ *record) (int, []byte, error) {
	if _, e := h.owner(r); e != nil {
		return 0, nil, e
	}
	u, auth, issuer := h.a2aEndpoint(r)
	body, err := json.Marshal(h.cfg.Card.Card(u, auth, issuer))
	return http.StatusOK, body, err
}

// a2aEndpoint is the URL of POST /a2a as the request reached it, and how
// it was authenticated, with the issuer of its token if it bore one:
// through a function URL or the REST API, whose path begins with its
// stage, over https; or the local run.
func (h *Handler) a2aEndpoint(r *http.Request) (string, a2a.Auth, string) {
	ctx := r.Context()
	scheme, prefix := "https", ""
	proxy, isProxy := lambdahttp.ProxyRequestFromContext(ctx)
	_, isURL := lambdahttp.URLRequestFromContext(ctx)
	switch {
	case isProxy:
		prefix = "/" + url.PathEscape(proxy.RequestContext.Stage)
	case !isURL && r.TLS == nil:
		scheme = "http"
	}
	host := r.Host
	if u, err := url.Parse("//" + host); err != nil || u.Host != host || u.User != nil {
		host = "localhost" // not a host: the caller's own problem
	}
	auth, issuer := a2a.AuthNone, ""
	if a := authorizer(ctx); a != nil {
		switch {
		case a.IAM != nil && isProxy:
			auth = a2a.AuthIAMAPIGateway
		case a.IAM != nil:
			auth = a2a.AuthIAMLambda
		case a.JWT != nil && a.JWT.Claims["iss"] != "":
			auth, issuer = a2a.AuthJWT, a.JWT.Claims["iss"]
		}
	}
	return scheme + "://" + host + prefix + "/a2a", auth, issuer
}

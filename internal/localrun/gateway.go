package localrun

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"
)

// Handler is a function's handler for HTTP API events.
type Handler func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error)

// Gateway turns HTTP requests into API Gateway HTTP API events (payload
// format 2.0) for the functions' own handlers, the way sam local start-api
// does, and their responses back into HTTP. Route keys are API Gateway's,
// such as "GET /sessions/{sessionId}".
type Gateway struct {
	mux *http.ServeMux
	// Timeout is the invocation deadline; API Gateway's HTTP API allows 30 s.
	Timeout time.Duration
	Logger  *slog.Logger
}

// maxBody is API Gateway's payload limit.
const maxBody = 10 << 20

var errBodyTooLarge = errors.New("the body is too large")

// NewGateway returns a Gateway with no routes.
func NewGateway(logger *slog.Logger) *Gateway {
	return &Gateway{mux: http.NewServeMux(), Timeout: 30 * time.Second, Logger: logger}
}

// Route sends requests that match key to h.
func (g *Gateway) Route(key string, h Handler) {
	g.mux.HandleFunc(key, func(w http.ResponseWriter, r *http.Request) { g.invoke(w, r, key, h) })
}

// Handle serves pattern with an ordinary HTTP handler, such as a page.
func (g *Gateway) Handle(pattern string, h http.Handler) { g.mux.Handle(pattern, h) }

// ServeHTTP implements http.Handler.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) { g.mux.ServeHTTP(w, r) }

func (g *Gateway) invoke(w http.ResponseWriter, r *http.Request, key string, h Handler) {
	ev, err := Event(r, key)
	if err != nil {
		status := http.StatusBadRequest
		if errors.Is(err, errBodyTooLarge) {
			status = http.StatusRequestEntityTooLarge
		}
		body, _ := json.Marshal(map[string]any{"error": map[string]string{"code": "invalid_body", "message": err.Error()}})
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = w.Write(body)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), g.Timeout)
	defer cancel()
	ctx = lambdacontext.NewContext(ctx, &lambdacontext.LambdaContext{
		AwsRequestID:       ev.RequestContext.RequestID,
		InvokedFunctionArn: "arn:aws:lambda:local:000000000000:function:local",
	})
	resp, err := h(ctx, ev)
	if err != nil {
		// Lambda would report an invocation error, which API Gateway turns
		// into a bare 500.
		g.Logger.ErrorContext(ctx, "handler error", "error", err)
		http.Error(w, `{"message":"Internal Server Error"}`, http.StatusInternalServerError)
		return
	}
	for k, v := range resp.Headers {
		w.Header().Set(k, v)
	}
	for _, c := range resp.Cookies {
		w.Header().Add("Set-Cookie", c)
	}
	body := []byte(resp.Body)
	if resp.IsBase64Encoded {
		if body, err = base64.StdEncoding.DecodeString(resp.Body); err != nil {
			http.Error(w, `{"message":"Internal Server Error"}`, http.StatusInternalServerError)
			return
		}
	}
	status := resp.StatusCode
	if status == 0 {
		status = http.StatusOK
	}
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// Event is the payload-2.0 event API Gateway would send for r on the route
// key. A bearer JWT's claims are decoded into the authorizer context without
// being verified: locally, as with sam local, there is no authorizer.
func Event(r *http.Request, key string) (events.APIGatewayV2HTTPRequest, error) {
	var body []byte
	var err error
	if r.Body != nil {
		body, err = io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	}
	if err != nil {
		return events.APIGatewayV2HTTPRequest{}, fmt.Errorf("read the body: %w", err)
	}
	if len(body) > maxBody {
		return events.APIGatewayV2HTTPRequest{}, fmt.Errorf("%w: over %d bytes", errBodyTooLarge, maxBody)
	}
	now := time.Now()
	ev := events.APIGatewayV2HTTPRequest{
		Version:        "2.0",
		RouteKey:       key,
		RawPath:        r.URL.EscapedPath(),
		RawQueryString: r.URL.RawQuery,
		Headers:        map[string]string{},
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			AccountID:    "000000000000",
			APIID:        "local",
			DomainName:   r.Host,
			DomainPrefix: "local",
			RequestID:    strings.TrimRight(base64.StdEncoding.EncodeToString([]byte(rand.Text()[:12])), "="),
			RouteKey:     key,
			Stage:        "$default",
			Time:         now.UTC().Format("02/Jan/2006:15:04:05 -0700"),
			TimeEpoch:    now.UnixMilli(),
			HTTP: events.APIGatewayV2HTTPRequestContextHTTPDescription{
				Method:    r.Method,
				Path:      r.URL.Path,
				Protocol:  r.Proto,
				SourceIP:  sourceIP(r),
				UserAgent: r.UserAgent(),
			},
		},
	}
	for k, vs := range r.Header {
		ev.Headers[strings.ToLower(k)] = strings.Join(vs, ",")
	}
	if q := r.URL.Query(); len(q) > 0 {
		ev.QueryStringParameters = map[string]string{}
		for k, vs := range q {
			ev.QueryStringParameters[k] = strings.Join(vs, ",")
		}
	}
	if id := r.PathValue("sessionId"); id != "" {
		ev.PathParameters = map[string]string{"sessionId": id}
	}
	if len(body) > 0 {
		if utf8.Valid(body) {
			ev.Body = string(body)
		} else {
			ev.Body, ev.IsBase64Encoded = base64.StdEncoding.EncodeToString(body), true
		}
	}
	if claims := bearerClaims(r.Header.Get("Authorization")); claims != nil {
		ev.RequestContext.Authorizer = &events.APIGatewayV2HTTPRequestContextAuthorizerDescription{
			JWT: &events.APIGatewayV2HTTPRequestContextAuthorizerJWTDescription{Claims: claims},
		}
	}
	return ev, nil
}

func sourceIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// bearerClaims decodes the claims of a bearer JWT, unverified, as strings,
// the way API Gateway passes them to the function.
func bearerClaims(auth string) map[string]string {
	token, ok := strings.CutPrefix(auth, "Bearer ")
	if !ok {
		return nil
	}
	parts := strings.Split(strings.TrimSpace(token), ".")
	if len(parts) != 3 {
		return nil
	}
	payload, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[1], "="))
	if err != nil {
		return nil
	}
	var raw map[string]any
	if json.Unmarshal(payload, &raw) != nil {
		return nil
	}
	claims := make(map[string]string, len(raw))
	for k, v := range raw {
		if s, ok := v.(string); ok {
			claims[k] = s
		} else {
			b, _ := json.Marshal(v)
			claims[k] = string(b)
		}
	}
	return claims
}

package lambdahttp

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/aws/aws-lambda-go/events"
)

// WrapStream returns the handler of a function that streams its answers to
// two kinds of callers, as lambda.StartHandlerFunc takes it: a function URL
// in RESPONSE_STREAM mode (served as WrapURL serves it) and a REST API
// method whose integration streams (served as WrapProxyStream serves it).
// It tells the two apart from the event's JSON (see EventKindOf), and fails
// the invocation for any other event.
func WrapStream(h http.Handler, opts StreamOptions) func(context.Context, json.RawMessage) (io.Reader, error) {
	serveURL := WrapURL(h)
	serveProxy := WrapProxyStream(h, opts)
	return func(ctx context.Context, raw json.RawMessage) (io.Reader, error) {
		kind, err := EventKindOf(raw)
		if err != nil {
			return nil, err
		}
		switch kind {
		case FunctionURLEvent:
			var ev events.LambdaFunctionURLRequest
			if err := json.Unmarshal(raw, &ev); err != nil {
				return nil, fmt.Errorf("lambdahttp: a function URL event: %w", err)
			}
			return serveURL(ctx, &ev)
		case ProxyEvent:
			var ev events.APIGatewayProxyRequest
			if err := json.Unmarshal(raw, &ev); err != nil {
				return nil, fmt.Errorf("lambdahttp: a REST API event: %w", err)
			}
			return serveProxy(ctx, &ev)
		default:
			return nil, fmt.Errorf("lambdahttp: no way to serve an event of kind %d", kind)
		}
	}
}

// EventKind is the kind of event a function is invoked with.
type EventKind int

// The kinds of events WrapStream serves.
const (
	// FunctionURLEvent is a function URL's event: version 2.0, with the
	// method under requestContext.http (events.LambdaFunctionURLRequest).
	FunctionURLEvent EventKind = iota + 1
	// ProxyEvent is a REST API's proxy event, payload format 1.0: the
	// method in httpMethod, beside the resource it matched
	// (events.APIGatewayProxyRequest).
	ProxyEvent
)

// EventKindOf tells a function URL's event from a REST API's by the fields
// that only one of them has, and fails for anything else, such as an HTTP
// API's payload 2.0 (a route key, which a function URL's is not) or JSON
// that is no event.
func EventKindOf(raw json.RawMessage) (EventKind, error) {
	var probe struct {
		Version        string          `json:"version"`
		RouteKey       string          `json:"routeKey"`
		HTTPMethod     string          `json:"httpMethod"`
		Resource       *string         `json:"resource"`
		RequestContext json.RawMessage `json:"requestContext"`
	}
	if err := json.Unmarshal(raw, &probe); err != nil {
		return 0, fmt.Errorf("lambdahttp: the event is not a JSON object: %w", err)
	}
	var rc struct {
		HTTP *struct {
			Method string `json:"method"`
		} `json:"http"`
	}
	if len(probe.RequestContext) > 0 {
		// A requestContext that is no object leaves rc empty: no event of
		// either kind.
		_ = json.Unmarshal(probe.RequestContext, &rc)
	}
	switch {
	case probe.HTTPMethod != "" && probe.Resource != nil && (probe.Version == "" || probe.Version == "1.0") && rc.HTTP == nil:
		return ProxyEvent, nil
	case probe.Version == "2.0" && rc.HTTP != nil && rc.HTTP.Method != "" && probe.HTTPMethod == "" && (probe.RouteKey == "" || probe.RouteKey == "$default"):
		return FunctionURLEvent, nil
	}
	return 0, fmt.Errorf("lambdahttp: the event is neither a function URL's (version 2.0, requestContext.http) nor a REST API's (httpMethod and resource): version %q, httpMethod %q", probe.Version, probe.HTTPMethod)
}

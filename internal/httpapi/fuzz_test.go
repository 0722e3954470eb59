package httpapi_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/lambda-agent/lambda-agent/internal/httpapi"
	"github.com/lambda-agent/lambda-agent/internal/lambdahttp"
	"github.com/lambda-agent/lambda-agent/internal/schema"
	"github.com/lambda-agent/lambda-agent/internal/telemetry"
	"github.com/lambda-agent/lambda-agent/internal/testkit/conversetest"
)

// checkAnswer fails unless resp is a success or a 4xx with an error body:
// against models and stores that work, no input may cause a 5xx, and none
// a redirect.
func checkAnswer(t *testing.T, resp events.APIGatewayV2HTTPResponse, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("the handler returned an error: %v", err)
	}
	checkStatus(t, resp.StatusCode, resp.Headers, []byte(resp.Body))
}

// checkStatus fails unless status is a 2xx, or a 4xx with an error body.
func checkStatus(t *testing.T, status int, headers map[string]string, body []byte) {
	t.Helper()
	if status >= 500 || status < 200 || status >= 300 && status < 400 {
		t.Fatalf("status %d %s: %s", status, headers["Location"], body)
	}
	if status >= 400 {
		var e struct {
			Error struct{ Code, Message string }
		}
		if json.Unmarshal(body, &e) != nil || e.Error.Code == "" || e.Error.Message == "" {
			t.Fatalf("status %d without an error body: %q", status, body)
		}
	}
}

func fuzzContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 30*time.Second)
}

// FuzzChatBody sends arbitrary bodies and headers to POST /chat and POST
// /structured. Seeds are in testdata/fuzz/FuzzChatBody.
func FuzzChatBody(f *testing.F) {
	f.Add(`{"message":"hi"}`, "", false)
	f.Add(`{"session_id":"s1","content":[{"text":"look"},{"image":{"format":"png","source":{"bytes":"iVBORw0KGgo="}}}]}`, "k1", false)
	f.Add(`{"session_id":"s1","message":`, "", false)
	f.Add(`{"prompt":"p","schema":{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]}}`, "", true)
	f.Add(`{"prompt":"p","schema":{"type":"object","$ref":"#/$defs/x","$defs":{"x":{"$ref":"#/$defs/x"}}}}`, "", true)
	a := newAPI(f, nil)
	chat, structured := fixture(f, "chat-new.json"), fixture(f, "structured.json")
	f.Fuzz(func(t *testing.T, body, idemKey string, toStructured bool) {
		e, serve := chat, a.chatFn
		if toStructured {
			e, serve = structured, a.structuredFn
		}
		e.Body = body
		e.Headers = map[string]string{"content-type": "application/json", "idempotency-key": idemKey}
		ctx, cancel := fuzzContext()
		defer cancel()
		resp, err := serve(ctx, e)
		checkAnswer(t, resp, err)
	})
}

// FuzzEvent sends arbitrary payload-2.0 events, whatever their route, path,
// parameters, headers, claims and encoding, to both functions, and the same
// request as a function URL's event to the stream function. No event gets a
// redirect or a 5xx. An event whose route key has path parameters is served
// by a route of the same segments, or by none: whatever a parameter holds,
// it never moves the request to another route. Seeds are in
// testdata/fuzz/FuzzEvent, and below: the sample events, with hostile path
// parameters, and with raw paths a ServeMux would clean or a URL parser
// refuse.
func FuzzEvent(f *testing.F) {
	add := func(e events.APIGatewayV2HTTPRequest) {
		raw, err := json.Marshal(e)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(raw)
	}
	for _, name := range []string{"chat-new.json", "chat-continue.json", "chat-tool.json", "chat-jwt.json", "structured.json", "session-get.json", "session-delete.json", "tool-call.json", "session-rewind.json", "session-export.json", "session-import.json"} {
		add(fixture(f, name))
	}
	for _, name := range []string{"session-get.json", "session-delete.json", "tool-call.json", "session-export.json"} {
		e := fixture(f, name)
		for param := range e.PathParameters {
			for _, v := range hostileParameters {
				hostile := fixture(f, name)
				hostile.PathParameters[param] = v
				add(hostile)
			}
		}
	}
	for _, path := range append(uncleanPaths, "/sessions/100%", "/sessions/a\x00b", "/sessions/a#b", "/sessions/demo-session%2Fexport") {
		e := fixture(f, "session-get.json")
		e.RouteKey, e.RawPath, e.PathParameters = "$default", path, nil
		add(e)
	}
	a := newAPI(f, nil)
	var route string // the route that served the last request, "" for none
	record := func(_ context.Context, r telemetry.Request) { route = r.Route }
	chatFn := lambdahttp.Wrap(a.recordedHandler(f, httpapi.ChatRoutes, record))
	structuredFn := lambdahttp.Wrap(a.recordedHandler(f, httpapi.StructuredRoutes, record))
	urlFn := lambdahttp.WrapURL(a.handler(f, httpapi.FunctionURLRoutes))
	f.Fuzz(func(t *testing.T, raw []byte) {
		var e events.APIGatewayV2HTTPRequest
		if json.Unmarshal(raw, &e) != nil {
			t.Skip("not an event: the Lambda runtime would refuse it before the handler")
		}
		for _, serve := range []func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error){chatFn, structuredFn} {
			route = ""
			ctx, cancel := fuzzContext()
			resp, err := serve(ctx, e)
			cancel()
			checkAnswer(t, resp, err)
			if want, ok := parameterRoute(e); ok && route != "" && !sameSegments(route, want) {
				t.Fatalf("the event of route %q, with parameters %q, reached the route %q: %d %s", e.RouteKey, e.PathParameters, route, resp.StatusCode, resp.Body)
			}
		}
		// A function URL's path is the client's, as it was encoded: it
		// begins with a slash, and its method is a token.
		if !strings.HasPrefix(e.RawPath, "/") {
			return
		}
		if _, err := http.NewRequest(e.RequestContext.HTTP.Method, "/", nil); err != nil {
			return
		}
		ctx, cancel := fuzzContext()
		defer cancel()
		resp, err := urlFn(ctx, &events.LambdaFunctionURLRequest{
			Version: "2.0", RawPath: e.RawPath, RawQueryString: e.RawQueryString, Headers: e.Headers, Body: e.Body, IsBase64Encoded: e.IsBase64Encoded,
			RequestContext: events.LambdaFunctionURLRequestContext{
				DomainName: "abc.lambda-url.us-east-1.on.aws",
				HTTP:       events.LambdaFunctionURLRequestContextHTTPDescription{Method: e.RequestContext.HTTP.Method, Path: e.RawPath},
			},
		})
		if err != nil {
			t.Fatalf("the function URL's invocation failed: %v", err)
		}
		body, _ := io.ReadAll(resp.Body)
		checkStatus(t, resp.StatusCode, resp.Headers, body)
	})
}

// recordedHandler is the handler of a function that serves routes, on a's
// stack, which tells record of each request it answers.
func (a *api) recordedHandler(t testing.TB, routes httpapi.Routes, record func(context.Context, telemetry.Request)) *httpapi.Handler {
	t.Helper()
	h, err := httpapi.New(httpapi.Config{
		Service: a.Turns, Routes: routes, CompileSchema: schema.Compile,
		Logger: slog.New(slog.NewJSONHandler(io.Discard, nil)), Record: record,
	})
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// routeKeyPattern is a route key of whole segments, each a literal or one
// parameter, as this API's are.
var routeKeyPattern = regexp.MustCompile(`^[A-Z]+ (/([^{}/]+|\{[A-Za-z0-9_]+\}))+$`)

// parameterRoute returns the route key of an event that API Gateway matched
// to a route with path parameters, all of them given, whose path the
// function takes from the route rather than from the raw path.
func parameterRoute(e events.APIGatewayV2HTTPRequest) (string, bool) {
	if !routeKeyPattern.MatchString(e.RouteKey) || !strings.Contains(e.RouteKey, "{") {
		return "", false
	}
	for seg := range strings.SplitSeq(e.RouteKey, "/") {
		if name, ok := strings.CutPrefix(seg, "{"); ok {
			if _, ok := e.PathParameters[strings.TrimSuffix(name, "}")]; !ok {
				return "", false
			}
		}
	}
	return e.RouteKey, true
}

// sameSegments reports whether the path of the pattern got has the segments
// of the route key want: as many, and the same literal wherever both have
// one.
func sameSegments(got, want string) bool {
	_, g, _ := strings.Cut(got, " ")
	_, w, _ := strings.Cut(want, " ")
	gs, ws := strings.Split(g, "/"), strings.Split(w, "/")
	if len(gs) != len(ws) {
		return false
	}
	for i := range gs {
		if !strings.HasPrefix(gs[i], "{") && !strings.HasPrefix(ws[i], "{") && gs[i] != ws[i] {
			return false
		}
	}
	return true
}

// FuzzStreamBody sends arbitrary bodies, idempotency keys and methods to the
// streaming chat. The answer is a 4xx with an error body, or a stream that
// ends with done or error; never a 5xx.
func FuzzStreamBody(f *testing.F) {
	f.Add(`{"message":"hi"}`, "", true)
	f.Add(`{"session_id":"s1","content":[{"text":"look"},{"image":{"format":"png","source":{"bytes":"iVBORw0KGgo="}}}]}`, "k1", true)
	f.Add(`{"session_id":"s1","message":`, "", true)
	f.Add(``, "", false)
	a := newAPI(f, nil)
	f.Fuzz(func(t *testing.T, body, idemKey string, post bool) {
		method := http.MethodPost
		if !post {
			method = http.MethodGet
		}
		req := httptest.NewRequest(method, "/chat/stream", strings.NewReader(body))
		req.Header.Set("Idempotency-Key", idemKey)
		ctx, cancel := fuzzContext()
		defer cancel()
		w := httptest.NewRecorder()
		a.stream.ServeHTTP(w, req.WithContext(ctx))
		switch {
		case w.Code == http.StatusOK:
			out := w.Body.String()
			if !strings.HasPrefix(out, "event: start\n") {
				t.Fatalf("a stream that does not begin with start: %q", out)
			}
			last := out[strings.LastIndex(strings.TrimSuffix(out, "\n\n"), "\n\n")+2:]
			if !strings.HasPrefix(last, "event: done\n") && !strings.HasPrefix(last, "event: error\n") {
				t.Fatalf("a stream that ends with neither done nor error: %q", last)
			}
		case w.Code >= 400 && w.Code < 500:
			var e struct {
				Error struct{ Code, Message string }
			}
			if json.Unmarshal(w.Body.Bytes(), &e) != nil || e.Error.Code == "" || e.Error.Message == "" {
				t.Fatalf("status %d without an error body: %q", w.Code, w.Body.String())
			}
		default:
			t.Fatalf("status %d: %s", w.Code, w.Body.String())
		}
	})
}

// FuzzAGUIBody sends arbitrary bodies to POST /agui, on a thread that holds
// a turn, one that waits for an approval, and new ones. The answer is a 4xx
// with an error body, or a stream of AG-UI events from RUN_STARTED to
// RUN_FINISHED or RUN_ERROR; never a 5xx.
func FuzzAGUIBody(f *testing.F) {
	for _, seed := range []string{
		`{"threadId":"t","runId":"r","messages":[{"id":"u-9","role":"user","content":"hi"}]}`,
		`{"threadId":"t","runId":"r","messages":[{"id":"u-1","role":"user","content":"hello"},{"id":"m-1","role":"assistant","content":"x"},{"id":"u-9","role":"user","content":[{"type":"text","text":"a"},{"type":"image","source":{"type":"data","value":"iVBORw0KGgo=","mimeType":"image/png"}}]}]}`,
		`{"threadId":"p","runId":"r","resume":[{"interruptId":"calc-1","status":"resolved"}]}`,
		`{"threadId":"p","runId":"r","resume":[{"interruptId":"calc-1","status":"cancelled","payload":{"reason":"no"}}],"messages":[{"id":"u-9","role":"user","content":"x"}]}`,
		`{"threadId":"n","runId":"r","messages":[{"id":"u","role":"user","content":"/tool show {}"}],"tools":[{"name":"show","description":"d","parameters":{"type":"object"}}],"context":[{"description":"d","value":"v"}]}`,
		`{"threadId":"t","runId":"r","messages":[{"id":"m-1","role":"assistant"},{"id":"x","role":"tool","toolCallId":"c","content":"r"}]}`,
		`{"threadId":"t","runId":"r","messages":[{"id":"s","role":"system","content":"x"}]}`,
		`{"threadId":"t","runId":`,
	} {
		f.Add(seed)
	}
	a := newAPI(f, map[string]string{"APPROVAL_TOOLS": "calculator"})
	post := func(body string) *httptest.ResponseRecorder {
		ctx, cancel := fuzzContext()
		defer cancel()
		w := httptest.NewRecorder()
		a.stream.ServeHTTP(w, httptest.NewRequestWithContext(ctx, http.MethodPost, "/agui", strings.NewReader(body)))
		return w
	}
	a.model.Enqueue(conversetest.Text("hello"))
	post(`{"threadId":"t","runId":"seed-t","messages":[{"id":"u-1","role":"user","content":"hello"}]}`)
	a.model.Enqueue(conversetest.ToolUse("calc-1", "calculator", map[string]string{"expression": "1+1"}))
	post(`{"threadId":"p","runId":"seed-p","messages":[{"id":"u-1","role":"user","content":"compute"}]}`)
	f.Fuzz(func(t *testing.T, body string) {
		w := post(body)
		switch {
		case w.Code == http.StatusOK:
			events := strings.Split(strings.TrimSpace(w.Body.String()), "\n\n")
			first, last := events[0], events[len(events)-1]
			if !strings.Contains(first, `"type":"RUN_STARTED"`) || !strings.Contains(last, `"type":"RUN_FINISHED"`) && !strings.Contains(last, `"type":"RUN_ERROR"`) {
				t.Fatalf("a stream from %q to %q", first, last)
			}
		default:
			checkStatus(t, w.Code, nil, w.Body.Bytes())
		}
	})
}

// FuzzA2ABody sends arbitrary bodies to POST /a2a, A2A's JSON-RPC
// endpoint, on a context with a completed task and one waiting for an
// approval: each gets a 4xx with an error body, or a 200 whose body, or
// every event of whose stream, is a JSON-RPC response with a result or an
// error; never an internal error, a 5xx or a panic.
func FuzzA2ABody(f *testing.F) {
	for _, seed := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"m-9","contextId":"c","role":"ROLE_USER","parts":[{"text":"hi"}]}}}`,
		`{"jsonrpc":"2.0","id":"s","method":"SendStreamingMessage","params":{"message":{"messageId":"m-8","role":"ROLE_USER","parts":[{"text":"hi"},{"data":{"a":1}}]}}}`,
		`{"jsonrpc":"2.0","id":2,"method":"SendMessage","params":{"message":{"messageId":"m-7","taskId":"cAowCnNlZWQtcA","role":"ROLE_USER","parts":[{"data":{"responses":[{"interrupt_id":"calc-1","approve":false}]}}]}}}`,
		`{"jsonrpc":"2.0","id":3,"method":"SendMessage","params":{"message":{"messageId":"m-6","role":"ROLE_USER","parts":[{"raw":"iVBORw0KGgo=","mediaType":"image/png"}]}}}`,
		`{"jsonrpc":"2.0","id":4,"method":"SendMessage","params":{"message":{"messageId":"m-5","role":"ROLE_USER","parts":[{"url":"http://169.254.169.254/"}]},"configuration":{"returnImmediately":true}}}`,
		`{"jsonrpc":"2.0","id":5,"method":"GetTask","params":{"id":"Yw","historyLength":-1}}`,
		`{"jsonrpc":"2.0","id":6,"method":"CancelTask","params":{"id":"cAowCnNlZWQtcA"}}`,
		`{"jsonrpc":"2.0","id":7,"method":"ListTasks","params":{"contextId":"c","pageSize":1000,"pageToken":"zz"}}`,
		`{"jsonrpc":"2.0","id":8,"method":"ListTasks","params":{}}`,
		`{"jsonrpc":"2.0","id":9,"method":"SubscribeToTask","params":{"id":"x"}}`,
		`{"jsonrpc":"1.0","id":10,"method":"GetTask"}`,
		`[{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"x"}}]`,
		`{"jsonrpc":"2.0","id":`,
	} {
		f.Add(seed)
	}
	a := newAPI(f, map[string]string{"APPROVAL_TOOLS": "calculator"})
	post := func(body string) *httptest.ResponseRecorder {
		ctx, cancel := fuzzContext()
		defer cancel()
		w := httptest.NewRecorder()
		r := httptest.NewRequestWithContext(ctx, http.MethodPost, "/a2a", strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		a.stream.ServeHTTP(w, r)
		return w
	}
	a.model.Enqueue(conversetest.Text("hello"))
	post(`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"seed-c","contextId":"c","role":"ROLE_USER","parts":[{"text":"hello"}]}}}`)
	a.model.Enqueue(conversetest.ToolUse("calc-1", "calculator", map[string]string{"expression": "1+1"}))
	post(`{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"seed-p","contextId":"p","role":"ROLE_USER","parts":[{"text":"compute"}]}}}`)
	a.model.Responder = conversetest.EchoResponder
	response := func(t *testing.T, raw string) {
		t.Helper()
		var r struct {
			JSONRPC string          `json:"jsonrpc"`
			Result  json.RawMessage `json:"result"`
			Error   *struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal([]byte(raw), &r); err != nil || r.JSONRPC != "2.0" || (r.Result == nil) == (r.Error == nil) {
			t.Fatalf("not a JSON-RPC response: %v %q", err, raw)
		}
		if r.Error != nil && (r.Error.Code == -32603 || r.Error.Message == "") {
			t.Fatalf("an internal error: %q", raw)
		}
	}
	f.Fuzz(func(t *testing.T, body string) {
		w := post(body)
		switch {
		case w.Code == http.StatusOK && strings.HasPrefix(w.Header().Get("Content-Type"), "text/event-stream"):
			for line := range strings.Lines(w.Body.String()) {
				if data, ok := strings.CutPrefix(strings.TrimSpace(line), "data: "); ok {
					response(t, data)
				}
			}
		case w.Code == http.StatusOK:
			response(t, w.Body.String())
		default:
			checkStatus(t, w.Code, nil, w.Body.Bytes())
		}
	})
}

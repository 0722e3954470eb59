package httpapi_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
)

// checkAnswer fails unless resp is a success or a 4xx with an error body:
// against models and stores that work, no input may cause a 5xx.
func checkAnswer(t *testing.T, resp events.APIGatewayV2HTTPResponse, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("the handler returned an error: %v", err)
	}
	if resp.StatusCode >= 500 || resp.StatusCode < 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, resp.Body)
	}
	if resp.StatusCode >= 400 {
		var body struct {
			Error struct{ Code, Message string }
		}
		if json.Unmarshal([]byte(resp.Body), &body) != nil || body.Error.Code == "" || body.Error.Message == "" {
			t.Fatalf("status %d without an error body: %q", resp.StatusCode, resp.Body)
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
// headers, claims and encoding, to both functions. Seeds are in
// testdata/fuzz/FuzzEvent.
func FuzzEvent(f *testing.F) {
	for _, name := range []string{"chat-new.json", "chat-continue.json", "chat-tool.json", "chat-jwt.json", "structured.json", "session-get.json", "session-delete.json", "tool-call.json", "session-rewind.json", "session-export.json", "session-import.json"} {
		raw, err := json.Marshal(fixture(f, name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(raw)
	}
	a := newAPI(f, nil)
	f.Fuzz(func(t *testing.T, raw []byte) {
		var e events.APIGatewayV2HTTPRequest
		if json.Unmarshal(raw, &e) != nil {
			t.Skip("not an event: the Lambda runtime would refuse it before the handler")
		}
		for _, serve := range []func(context.Context, events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error){a.chatFn, a.structuredFn} {
			ctx, cancel := fuzzContext()
			resp, err := serve(ctx, e)
			cancel()
			checkAnswer(t, resp, err)
		}
	})
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

package httpapi_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdaurl"
	"github.com/lambda-agent/lambda-agent/internal/httpapi"
	"github.com/lambda-agent/lambda-agent/internal/lambdahttp"
	"github.com/lambda-agent/lambda-agent/internal/testkit"
	"github.com/lambda-agent/lambda-agent/internal/testkit/conversetest"
)

// card is what an agent card says of where and how to call the agent.
type card struct {
	Description         string `json:"description"`
	SupportedInterfaces []struct {
		URL             string `json:"url"`
		ProtocolBinding string `json:"protocolBinding"`
		ProtocolVersion string `json:"protocolVersion"`
	} `json:"supportedInterfaces"`
	SecuritySchemes map[string]struct {
		OpenIDConnect *struct {
			URL string `json:"openIdConnectUrl"`
		} `json:"openIdConnectSecurityScheme"`
	} `json:"securitySchemes"`
}

func decodeCard(t *testing.T, status int, body io.Reader) card {
	t.Helper()
	raw, _ := io.ReadAll(body)
	var c card
	if status != http.StatusOK || json.Unmarshal(raw, &c) != nil || len(c.SupportedInterfaces) != 1 {
		t.Fatalf("%d %s", status, raw)
	}
	return c
}

// TestAgentCardSaysHowToCall: the card names POST /a2a where the request
// for it came, through the function URL or under the REST API's stage, or
// A2A_PUBLIC_URL; and the way its callers authenticate, as that request
// did: SigV4 for lambda through the URL, an OpenID Connect scheme of the
// token's issuer through the REST API, SigV4 for execute-api there.
func TestAgentCardSaysHowToCall(t *testing.T) {
	a := newAPI(t, nil)
	url := lambdaurl.Wrap(a.handler(t, httpapi.FunctionURLRoutes))
	resp, err := url(t.Context(), &events.LambdaFunctionURLRequest{
		Version: "2.0", RawPath: "/.well-known/agent-card.json",
		Headers: map[string]string{"host": "abc.lambda-url.us-east-1.on.aws"},
		RequestContext: events.LambdaFunctionURLRequestContext{
			RequestID: "r1", DomainName: "abc.lambda-url.us-east-1.on.aws",
			HTTP:       events.LambdaFunctionURLRequestContextHTTPDescription{Method: http.MethodGet, Path: "/.well-known/agent-card.json"},
			Authorizer: &events.LambdaFunctionURLRequestContextAuthorizerDescription{IAM: &events.LambdaFunctionURLRequestContextAuthorizerIAMDescription{UserARN: "arn:aws:iam::123456789012:user/alice", AccountID: "123456789012"}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	c := decodeCard(t, resp.StatusCode, resp.Body)
	if c.SupportedInterfaces[0].URL != "https://abc.lambda-url.us-east-1.on.aws/a2a" || len(c.SecuritySchemes) != 0 || !strings.Contains(c.Description, "for the service lambda") {
		t.Errorf("through the function URL: %+v", c)
	}

	rest := lambdahttp.WrapProxyStream(a.handler(t, httpapi.FunctionURLRoutes), lambdahttp.StreamOptions{})
	restCard := func(t *testing.T, authorizer map[string]any, identity bool) card {
		t.Helper()
		ev, err := testkit.ProxyEvent("agui-rest.json")
		if err != nil {
			t.Fatal(err)
		}
		ev.HTTPMethod, ev.Path, ev.Resource, ev.Body = http.MethodGet, "/.well-known/agent-card.json", "/.well-known/agent-card.json", ""
		ev.RequestContext.HTTPMethod, ev.RequestContext.ResourcePath = http.MethodGet, "/.well-known/agent-card.json"
		ev.RequestContext.Authorizer = authorizer
		if identity {
			ev.RequestContext.Identity = events.APIGatewayRequestIdentity{UserArn: "arn:aws:iam::123456789012:user/bob", AccountID: "123456789012", Caller: "AIDA"}
		}
		resp, err := rest(t.Context(), &ev)
		if err != nil {
			t.Fatal(err)
		}
		return decodeCard(t, resp.StatusCode, resp.Body)
	}
	const issuer = "https://cognito-idp.us-east-1.amazonaws.com/us-east-1_AbC"
	c = restCard(t, map[string]any{"claims": map[string]any{"sub": "u-1", "iss": issuer}}, false)
	if c.SupportedInterfaces[0].URL != "https://r3st4p1id0.execute-api.us-east-1.amazonaws.com/stream/a2a" || c.SecuritySchemes["jwt"].OpenIDConnect == nil ||
		c.SecuritySchemes["jwt"].OpenIDConnect.URL != issuer+"/.well-known/openid-configuration" {
		t.Errorf("through the REST API, with a JWT: %+v", c)
	}
	c = restCard(t, map[string]any{"principalId": "u-2", "sub": "u-2", "iss": "https://login.example.com/"}, false)
	if c.SecuritySchemes["jwt"].OpenIDConnect == nil || c.SecuritySchemes["jwt"].OpenIDConnect.URL != "https://login.example.com/.well-known/openid-configuration" {
		t.Errorf("through the REST API, with the Lambda authorizer's JWT: %+v", c)
	}
	c = restCard(t, nil, true)
	if len(c.SecuritySchemes) != 0 || !strings.Contains(c.Description, "for the service execute-api") {
		t.Errorf("through the REST API, signed: %+v", c)
	}

	pub := newAPI(t, map[string]string{"A2A_PUBLIC_URL": "https://agents.example.com/support/a2a", "A2A_NAME": "support"})
	w := httptest.NewRecorder()
	pub.h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/.well-known/agent-card.json", nil))
	if c := decodeCard(t, w.Code, w.Body); c.SupportedInterfaces[0].URL != "https://agents.example.com/support/a2a" {
		t.Errorf("with A2A_PUBLIC_URL: %+v", c)
	}
}

// TestA2AErrorsCarryTheirCodes: A2A's errors carry the HTTP API's code and
// status in their data, as docs/a2a.md's table says: a model that stays
// unavailable is a ServerError worth a retry, and a raw part of a media
// type the agent does not take is ContentTypeNotSupported; a caller the
// function refuses gets the HTTP API's 401 before JSON-RPC is read.
func TestA2AErrorsCarryTheirCodes(t *testing.T) {
	a := newAPI(t, nil)
	a.model.Responder = func(*conversetest.Request) conversetest.Reply { return conversetest.Unavailable() }
	rpc := func(h http.Handler, body string) (int, map[string]any) {
		t.Helper()
		w := httptest.NewRecorder()
		r := httptest.NewRequest(http.MethodPost, "/a2a", strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		h.ServeHTTP(w, r)
		var out map[string]any
		if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil {
			t.Fatalf("%d %q", w.Code, w.Body)
		}
		return w.Code, out
	}
	errorOf := func(out map[string]any) (int, string) {
		e, _ := out["error"].(map[string]any)
		code, _ := e["code"].(float64)
		ours := ""
		data, _ := e["data"].([]any)
		for _, d := range data {
			if m, ok := d.(map[string]any); ok && m["code"] != nil {
				ours, _ = m["code"].(string)
			}
		}
		return int(code), ours
	}
	status, out := rpc(a.h, `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"down","role":"ROLE_USER","parts":[{"text":"hi"}]}}}`)
	if code, ours := errorOf(out); status != http.StatusOK || code != -32000 || ours != "model_error" {
		t.Errorf("a model that stays unavailable: %d, %d %q: %v", status, code, ours, out)
	}
	status, out = rpc(a.h, `{"jsonrpc":"2.0","id":2,"method":"SendMessage","params":{"message":{"messageId":"zip","role":"ROLE_USER","parts":[{"raw":"UEsDBA==","mediaType":"application/zip"}]}}}`)
	if code, ours := errorOf(out); code != -32005 || ours != "invalid_content" {
		t.Errorf("a zip: %d, %d %q: %v", status, code, ours, out)
	}
	strict := newAPI(t, map[string]string{"REQUIRE_AUTH": "true"})
	status, out = rpc(strict.h, `{"jsonrpc":"2.0","id":3,"method":"GetTask","params":{"id":"x"}}`)
	if e, _ := out["error"].(map[string]any); status != http.StatusUnauthorized || e["code"] != "unauthorized" {
		t.Errorf("no caller, where one is required: %d %v", status, out)
	}
}

// TestA2AListTasksPages: ListTasks pages through a context's tasks, oldest
// first, and through the caller's sessions, newest first, one task each,
// with pageToken, as docs/a2a.md says.
func TestA2AListTasksPages(t *testing.T) {
	a := newAPI(t, nil)
	rpc := func(method string, params any) map[string]any {
		t.Helper()
		body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
		w := httptest.NewRecorder()
		r := httptest.NewRequest(http.MethodPost, "/a2a", strings.NewReader(string(body)))
		r.Header.Set("Content-Type", "application/json")
		a.h.ServeHTTP(w, r)
		var out struct{ Result map[string]any }
		if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil || out.Result == nil {
			t.Fatalf("%s: %d %s", method, w.Code, w.Body)
		}
		return out.Result
	}
	send := func(id, context, text string) {
		t.Helper()
		rpc("SendMessage", map[string]any{"message": map[string]any{"messageId": id, "contextId": context, "role": "ROLE_USER", "parts": []any{map[string]any{"text": text}}}})
	}
	for i, text := range []string{"one", "two", "three"} {
		send(fmt.Sprintf("m%d", i), "pages", text)
	}
	send("other", "elsewhere", "four")
	texts := func(res map[string]any) []string {
		var out []string
		for _, task := range res["tasks"].([]any) {
			hist, _ := task.(map[string]any)["history"].([]any)
			out = append(out, hist[0].(map[string]any)["parts"].([]any)[0].(map[string]any)["text"].(string))
		}
		return out
	}
	first := rpc("ListTasks", map[string]any{"contextId": "pages", "pageSize": 2, "historyLength": 1})
	if got := texts(first); strings.Join(got, " ") != "one two" || first["nextPageToken"] == "" {
		t.Fatalf("the first page: %v, next %q", got, first["nextPageToken"])
	}
	second := rpc("ListTasks", map[string]any{"contextId": "pages", "pageSize": 2, "historyLength": 1, "pageToken": first["nextPageToken"]})
	if got := texts(second); strings.Join(got, " ") != "three" || second["nextPageToken"] != "" {
		t.Errorf("the second page: %v, next %q", got, second["nextPageToken"])
	}
	sessions := rpc("ListTasks", map[string]any{"pageSize": 1})
	tasks := sessions["tasks"].([]any)
	if len(tasks) != 1 || tasks[0].(map[string]any)["contextId"] != "elsewhere" || sessions["nextPageToken"] == "" {
		t.Errorf("the sessions' first page: %v", sessions)
	}
	more := rpc("ListTasks", map[string]any{"pageSize": 1, "pageToken": sessions["nextPageToken"]})
	if tasks := more["tasks"].([]any); len(tasks) != 1 || tasks[0].(map[string]any)["contextId"] != "pages" {
		t.Errorf("the sessions' next page: %v", more)
	}

	// A task goes with its session.
	id := first["tasks"].([]any)[0].(map[string]any)["id"]
	w := httptest.NewRecorder()
	a.h.ServeHTTP(w, httptest.NewRequest(http.MethodDelete, "/sessions/pages", nil))
	if w.Code != http.StatusNoContent && w.Code != http.StatusOK {
		t.Fatalf("DELETE: %d %s", w.Code, w.Body)
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": 9, "method": "GetTask", "params": map[string]any{"id": id}})
	w = httptest.NewRecorder()
	r := httptest.NewRequest(http.MethodPost, "/a2a", strings.NewReader(string(body)))
	r.Header.Set("Content-Type", "application/json")
	a.h.ServeHTTP(w, r)
	if !strings.Contains(w.Body.String(), `"code":-32001`) {
		t.Errorf("GetTask of a deleted session's task: %s", w.Body)
	}
}

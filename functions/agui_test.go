package functions_test

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/lambda-agent/lambda-agent/internal/testkit/aguiclient"
	"github.com/lambda-agent/lambda-agent/internal/testkit/runtimetest"
)

// front serves HTTP as Lambda's fronts do for the built stream function:
// each request becomes the event of the function URL (IAM) or of the REST
// API (a Cognito user pool's claims), whose answer, in Lambda's streamed
// form, becomes the response. A request with a bearer token comes from
// another caller, mallory.
func front(t *testing.T, fn *runtimetest.Function, rest bool) string {
	t.Helper()
	srv := httptest.NewServer(frontHandler(t, fn, rest))
	t.Cleanup(srv.Close)
	return srv.URL
}

// frontHandler is front's handler.
func frontHandler(t *testing.T, fn *runtimetest.Function, rest bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		caller := "ada"
		if strings.HasPrefix(r.Header.Get("Authorization"), "Bearer ") {
			caller = "mallory"
		}
		var event []byte
		if rest {
			event = restEvent(t, r, body, caller)
		} else {
			event = urlEvent(t, r, body, caller)
		}
		relayStreamed(w, r, fn, event)
	})
}

// relayStreamed invokes fn with event and writes its streamed answer (a
// JSON prelude, eight zero bytes, the body) as the response to r.
func relayStreamed(w http.ResponseWriter, r *http.Request, fn *runtimetest.Function, event []byte) {
	out, err := fn.Invoke(r.Context(), event, 30*time.Second)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	prelude, rest, ok := bytes.Cut(out, make([]byte, 8))
	var p struct {
		StatusCode int               `json:"statusCode"`
		Headers    map[string]string `json:"headers"`
	}
	if !ok || json.Unmarshal(prelude, &p) != nil {
		http.Error(w, "not a streamed answer: "+string(out), http.StatusBadGateway)
		return
	}
	for k, v := range p.Headers {
		w.Header().Set(k, v)
	}
	w.WriteHeader(p.StatusCode)
	_, _ = w.Write(rest)
}

func sample[E any](t *testing.T, name string) E {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "events", name))
	if err != nil {
		t.Fatal(err)
	}
	var e E
	if err := json.Unmarshal(raw, &e); err != nil {
		t.Fatal(err)
	}
	return e
}

func urlEvent(t *testing.T, r *http.Request, body []byte, caller string) []byte {
	e := sample[events.LambdaFunctionURLRequest](t, "stream-chat.json")
	e.RawPath, e.RawQueryString = r.URL.Path, r.URL.RawQuery
	e.RequestContext.DomainName = r.Host // the URL's host, as Lambda gives it
	e.RequestContext.HTTP.Method, e.RequestContext.HTTP.Path = r.Method, r.URL.Path
	e.RequestContext.Authorizer.IAM.UserARN = "arn:aws:sts::123456789012:assumed-role/chat-client/" + caller
	e.Headers = map[string]string{"content-type": r.Header.Get("Content-Type"), "accept": r.Header.Get("Accept")}
	e.Body, e.IsBase64Encoded = base64.StdEncoding.EncodeToString(body), true
	raw, _ := json.Marshal(e)
	return raw
}

func restEvent(t *testing.T, r *http.Request, body []byte, caller string) []byte {
	e := sample[events.APIGatewayProxyRequest](t, "agui-rest.json")
	e.HTTPMethod, e.RequestContext.HTTPMethod = r.Method, r.Method
	e.Path = r.URL.Path
	e.Resource, e.RequestContext.ResourcePath = r.URL.Path, r.URL.Path
	if strings.HasPrefix(r.URL.Path, "/sessions/") {
		e.Resource, e.RequestContext.ResourcePath = "/sessions/{id}", "/sessions/{id}"
		e.PathParameters = map[string]string{"id": strings.TrimPrefix(r.URL.Path, "/sessions/")}
	}
	e.RequestContext.Authorizer["claims"].(map[string]any)["sub"] = caller
	e.Headers = map[string]string{"content-type": r.Header.Get("Content-Type"), "accept": r.Header.Get("Accept")}
	e.MultiValueHeaders = nil
	e.QueryStringParameters = map[string]string{}
	for k, v := range r.URL.Query() {
		e.QueryStringParameters[k] = v[0]
	}
	e.Body, e.IsBase64Encoded = base64.StdEncoding.EncodeToString(body), true
	raw, _ := json.Marshal(e)
	return raw
}

// TestAGUIThroughTheBuiltStreamFunction: the official AG-UI client holds
// conversations with the built stream function, through its URL's events
// and its REST API's: a plain run of the whole thread and of new messages,
// an approval resolved and cancelled, a client tool's round trip, errors,
// and another caller, who gets a 404 before any event. Every event passes
// @ag-ui/core's schemas, and the client ends holding the stored thread.
func TestAGUIThroughTheBuiltStreamFunction(t *testing.T) {
	d := deploy(t, "APPROVAL_TOOLS=calculator")
	for _, api := range []string{"url", "rest"} {
		t.Run(api, func(t *testing.T) {
			base := front(t, d.fns["stream"], api == "rest")
			scenarios := []string{"whole", "new", "approval", "client-tool", "errors", "foreign"}
			if api == "rest" {
				scenarios = []string{"whole", "approval", "foreign"}
			}
			for _, scenario := range scenarios {
				t.Run(scenario, func(t *testing.T) {
					bearer := ""
					if scenario == "foreign" {
						bearer = "mallory's token"
					}
					res := aguiclient.Run(t, base+"/agui", scenario, bearer)
					switch scenario {
					case "errors":
						if len(res.Runs) != 2 || !strings.Contains(res.Runs[0].Err(), "400") || !strings.Contains(res.Runs[1].Err(), "413") {
							t.Errorf("errors: %+v", res.Runs)
						}
						return
					case "foreign":
						if len(res.Runs) != 2 || res.Runs[0].Err() != "" || !strings.Contains(res.Runs[1].Err(), "404") || len(res.Runs[1].Events) != 0 {
							t.Errorf("another caller: %+v", res.Runs)
						}
						return
					case "client-tool":
						if len(res.Runs) != 4 || !strings.Contains(res.Runs[1].Err(), "409") {
							t.Fatalf("runs %+v", res.Runs)
						}
						res.Runs = slices.Delete(res.Runs, 1, 2)
					case "approval":
						if len(res.Runs) != 5 || !strings.Contains(res.Runs[3].Err(), "not addressed by resume") {
							t.Fatalf("runs %+v", res.Runs)
						}
						if o := res.Runs[0].Outcome; o == nil || o.Type != "interrupt" {
							t.Errorf("the approval's outcome %+v", o)
						}
						res.Runs = slices.Delete(res.Runs, 3, 4)
					}
					for i, r := range res.Runs {
						r.OK(t, scenario+" run "+string(rune('1'+i)))
					}
					aguiclient.SameThread(t, aguiclient.Stored(t, base, res.ThreadID), res)
				})
			}
		})
	}
	if t.Failed() {
		t.Logf("logs:\n%s", d.fns["stream"].Logs())
	}
}

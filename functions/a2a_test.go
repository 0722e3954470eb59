package functions_test

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"
	"github.com/aws/aws-lambda-go/events"
	"github.com/lambda-agent/lambda-agent/internal/testkit/runtimetest"
)

// bearerAs makes a client another caller to front, as its bearer token
// says.
type bearerAs struct{ next http.RoundTripper }

func (b bearerAs) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer mallory")
	return b.next.RoundTrip(r)
}

// TestA2AThroughTheBuiltStreamFunction: the official A2A client finds the
// built stream function by its card, through the function URL's events
// (served over TLS, as the card's https URL needs), follows the URL the
// card names, and holds tasks with it: blocking and streamed, an approval
// through TASK_STATE_INPUT_REQUIRED read back by a new process, a cancel;
// another caller finds nothing, and bad requests get A2A's errors.
func TestA2AThroughTheBuiltStreamFunction(t *testing.T) {
	d := deploy(t, "APPROVAL_TOOLS=calculator", "A2A_NAME=built")
	fn := d.fns["stream"]
	srv := httptest.NewTLSServer(frontHandler(t, fn, false))
	t.Cleanup(srv.Close)
	hc := srv.Client()
	card, err := agentcard.NewResolver(hc).Resolve(t.Context(), srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	if card.Name != "built" || len(card.SupportedInterfaces) != 1 || card.SupportedInterfaces[0].URL != srv.URL+"/a2a" ||
		card.SupportedInterfaces[0].ProtocolVersion != "1.0" || len(card.SecuritySchemes) != 0 ||
		!strings.Contains(card.Description, "Signature Version 4 for the service lambda") {
		t.Fatalf("card %+v, interfaces %+v", card, card.SupportedInterfaces[0])
	}
	c, err := a2aclient.NewFromCard(t.Context(), card, a2aclient.WithJSONRPCTransport(hc))
	if err != nil {
		t.Fatal(err)
	}
	send := func(msg *a2a.Message) *a2a.Task {
		t.Helper()
		res, err := c.SendMessage(t.Context(), &a2a.SendMessageRequest{Message: msg})
		if err != nil {
			t.Fatalf("SendMessage: %v\n%s", err, fn.Logs())
		}
		return res.(*a2a.Task)
	}
	answer := func(task *a2a.Task) string {
		return task.Artifacts[len(task.Artifacts)-1].Parts[0].Text()
	}

	hello := send(a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("Hello there")))
	if hello.Status.State != a2a.TaskStateCompleted || !strings.Contains(answer(hello), "Hello there") {
		t.Fatalf("blocking: %+v", hello.Status)
	}
	streamAnd(t, c, hello.ContextID)

	paused := send(a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("What is 120*1.2?")))
	if paused.Status.State != a2a.TaskStateInputRequired {
		t.Fatalf("the approval: %+v", paused.Status)
	}
	// Another process reads the task from the session.
	if err := fn.Restart(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got, err := c.GetTask(t.Context(), &a2a.GetTaskRequest{ID: paused.ID}); err != nil || got.Status.State != a2a.TaskStateInputRequired {
		t.Fatalf("GetTask from a new process: %v %+v", err, got)
	}
	var interruptID string
	for _, p := range paused.Status.Message.Parts {
		if d, ok := p.Data().(map[string]any); ok {
			interruptID, _ = d["interrupts"].([]any)[0].(map[string]any)["id"].(string)
		}
	}
	done := send(a2a.NewMessageForTask(a2a.MessageRoleUser, paused, a2a.NewDataPart(map[string]any{"responses": []any{map[string]any{"interrupt_id": interruptID, "approve": true}}})))
	if done.Status.State != a2a.TaskStateCompleted || !strings.Contains(answer(done), "144") {
		t.Fatalf("the approved task: %+v %q", done.Status, answer(done))
	}
	toCancel := send(a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("What is 2*21?")))
	if toCancel.Status.State != a2a.TaskStateInputRequired {
		t.Fatalf("the task to cancel: %+v", toCancel.Status)
	}
	if canceled, err := c.CancelTask(t.Context(), &a2a.CancelTaskRequest{ID: toCancel.ID}); err != nil || canceled.Status.State != a2a.TaskStateCanceled {
		t.Fatalf("CancelTask: %v %+v", err, canceled)
	}
	if got, err := c.GetTask(t.Context(), &a2a.GetTaskRequest{ID: toCancel.ID}); err != nil || got.Status.State != a2a.TaskStateCanceled {
		t.Errorf("GetTask of the canceled task: %v %+v", err, got)
	}
	for name, id := range map[string]a2a.TaskID{"canceled": toCancel.ID, "completed": hello.ID} {
		if _, err := c.CancelTask(t.Context(), &a2a.CancelTaskRequest{ID: id}); !errors.Is(err, a2a.ErrTaskNotCancelable) {
			t.Errorf("CancelTask of the %s task: %v", name, err)
		}
	}

	mallory := &http.Client{Transport: bearerAs{hc.Transport}}
	other, err := a2aclient.NewFromCard(t.Context(), card, a2aclient.WithJSONRPCTransport(mallory))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.GetTask(t.Context(), &a2a.GetTaskRequest{ID: hello.ID}); !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Errorf("another caller's GetTask: %v", err)
	}
	// Nor can another caller end, answer or list a task that waits.
	waiting := send(a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("What is 3*3?")))
	if _, err := other.CancelTask(t.Context(), &a2a.CancelTaskRequest{ID: waiting.ID}); !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Errorf("another caller's CancelTask: %v", err)
	}
	if _, err := other.SendMessage(t.Context(), &a2a.SendMessageRequest{Message: a2a.NewMessageForTask(a2a.MessageRoleUser, waiting, a2a.NewTextPart("yes"))}); !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Errorf("another caller's answer: %v", err)
	}
	intrude := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("Mine now"))
	intrude.ContextID = hello.ContextID
	if _, err := other.SendMessage(t.Context(), &a2a.SendMessageRequest{Message: intrude}); !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Errorf("another caller's message in the context: %v", err)
	}
	if l, err := other.ListTasks(t.Context(), &a2a.ListTasksRequest{}); err != nil || len(l.Tasks) != 0 {
		t.Errorf("another caller's ListTasks: %v %+v", err, l)
	}
	if got, err := c.GetTask(t.Context(), &a2a.GetTaskRequest{ID: waiting.ID}); err != nil || got.Status.State != a2a.TaskStateInputRequired {
		t.Errorf("the task another caller tried: %v %+v", err, got)
	}

	for name, req := range map[string]*a2a.SendMessageRequest{
		"a url part":        {Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewFileURLPart("http://169.254.169.254/", "text/plain"))},
		"an agent's":        {Message: a2a.NewMessage(a2a.MessageRoleAgent, a2a.NewTextPart("hi"))},
		"returnImmediately": {Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("hi")), Config: &a2a.SendMessageConfig{ReturnImmediately: true}},
	} {
		want := map[string]error{"a url part": a2a.ErrUnsupportedContentType, "an agent's": a2a.ErrInvalidParams, "returnImmediately": a2a.ErrUnsupportedOperation}[name]
		if _, err := c.SendMessage(t.Context(), req); !errors.Is(err, want) {
			t.Errorf("%s: %v; want %v", name, err, want)
		}
	}
	big := `{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"messageId":"big","role":"ROLE_USER","parts":[{"text":"` + strings.Repeat("x", 1<<20) + `"}]}}}`
	resp, err := hc.Post(srv.URL+"/a2a", "application/json", strings.NewReader(big))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var refused map[string]any
	if err := json.NewDecoder(resp.Body).Decode(&refused); err != nil {
		t.Fatal(err)
	}
	// The HTTP API's refusal, not JSON-RPC's: there is no "jsonrpc".
	if e, _ := refused["error"].(map[string]any); resp.StatusCode != http.StatusRequestEntityTooLarge ||
		resp.Header.Get("Content-Type") != "application/json" || e["code"] != "message_too_large" || refused["jsonrpc"] != nil {
		t.Errorf("a body over the limit: %d %s %v", resp.StatusCode, resp.Header.Get("Content-Type"), refused)
	}
}

// restFront serves HTTP as the stream REST API does at its stage: a
// request for /stream/... becomes a REST API event for the resource
// under it, on the API's host, from a Cognito user pool's user (mallory
// with a bearer token, as front's), and its streamed answer the response.
func restFront(t *testing.T, fn *runtimetest.Function) http.Handler {
	return http.StripPrefix("/stream", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		caller := "ada"
		if strings.HasPrefix(r.Header.Get("Authorization"), "Bearer ") {
			caller = "mallory"
		}
		var e events.APIGatewayProxyRequest
		if err := json.Unmarshal(restEvent(t, r, body, caller), &e); err != nil {
			t.Error(err)
			return
		}
		// As the API's default domain gives them: the host it was called
		// on, and the path under the stage (which restEvent has).
		e.RequestContext.DomainName = r.Host
		e.RequestContext.Path = "/" + e.RequestContext.Stage + r.URL.Path
		event, _ := json.Marshal(e)
		relayStreamed(w, r, fn, event)
	}))
}

// TestA2AThroughTheBuiltStreamFunctionsRESTAPI: through the stream REST
// API, the card the official client finds at the stage names /a2a under
// the stage, and the Cognito issuer's OpenID configuration as its
// security; the client follows it for a blocking and a streamed send, and
// another user of the pool finds nothing.
func TestA2AThroughTheBuiltStreamFunctionsRESTAPI(t *testing.T) {
	d := deploy(t, "A2A_NAME=built")
	fn := d.fns["stream"]
	srv := httptest.NewTLSServer(restFront(t, fn))
	t.Cleanup(srv.Close)
	hc := srv.Client()
	card, err := agentcard.NewResolver(hc).Resolve(t.Context(), srv.URL+"/stream")
	if err != nil {
		t.Fatalf("%v\n%s", err, fn.Logs())
	}
	oidc, _ := card.SecuritySchemes["jwt"].(a2a.OpenIDConnectSecurityScheme)
	if len(card.SupportedInterfaces) != 1 || card.SupportedInterfaces[0].URL != srv.URL+"/stream/a2a" ||
		oidc.OpenIDConnectURL != "https://cognito-idp.us-east-1.amazonaws.com/us-east-1_Example/.well-known/openid-configuration" ||
		len(card.SecurityRequirements) != 1 {
		t.Fatalf("card %+v, interfaces %+v", card, card.SupportedInterfaces)
	}
	c, err := a2aclient.NewFromCard(t.Context(), card, a2aclient.WithJSONRPCTransport(hc))
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.SendMessage(t.Context(), &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("Hello through REST"))})
	if err != nil {
		t.Fatalf("SendMessage: %v\n%s", err, fn.Logs())
	}
	hello, _ := res.(*a2a.Task)
	if hello == nil || hello.Status.State != a2a.TaskStateCompleted || !strings.Contains(hello.Status.Message.Parts[0].Text(), "Hello through REST") {
		t.Fatalf("blocking: %+v", res)
	}
	streamAnd(t, c, hello.ContextID)
	if l, err := c.ListTasks(t.Context(), &a2a.ListTasksRequest{ContextID: hello.ContextID}); err != nil || len(l.Tasks) != 2 {
		t.Errorf("ListTasks of the context: %v %+v", err, l)
	}

	mallory := &http.Client{Transport: bearerAs{hc.Transport}}
	other, err := a2aclient.NewFromCard(t.Context(), card, a2aclient.WithJSONRPCTransport(mallory))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.GetTask(t.Context(), &a2a.GetTaskRequest{ID: hello.ID}); !errors.Is(err, a2a.ErrTaskNotFound) {
		t.Errorf("another user's GetTask: %v", err)
	}
}

// streamAnd streams "And streamed" to context through c, and fails the
// test unless the task completes with the text streamed back.
func streamAnd(t *testing.T, c *a2aclient.Client, context string) {
	t.Helper()
	streamed := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("And streamed"))
	streamed.ContextID = context
	var final a2a.TaskState
	var text strings.Builder
	for ev, err := range c.SendStreamingMessage(t.Context(), &a2a.SendMessageRequest{Message: streamed}) {
		if err != nil {
			t.Fatal(err)
		}
		switch e := ev.(type) {
		case *a2a.TaskArtifactUpdateEvent:
			text.WriteString(e.Artifact.Parts[0].Text())
		case *a2a.TaskStatusUpdateEvent:
			final = e.Status.State
		}
	}
	if final != a2a.TaskStateCompleted || !strings.Contains(text.String(), "And streamed") {
		t.Fatalf("streamed: %s %q", final, text.String())
	}
}

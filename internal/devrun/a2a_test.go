package devrun_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"
	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/devrun"
	"github.com/lambda-agent/lambda-agent/internal/testkit"
)

// bearer sends a token that names sub, as the local run reads one.
type bearer struct{ sub string }

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	claims := base64.RawURLEncoding.EncodeToString([]byte(`{"sub":"` + b.sub + `"}`))
	r.Header.Set("Authorization", "Bearer header."+claims+".signature")
	return http.DefaultTransport.RoundTrip(r)
}

// a2aClient discovers the local run's card as sub ("" for the anonymous
// caller), and returns a client built from it by the official SDK, which
// calls the URL the card names.
func a2aClient(t *testing.T, url, sub string) (*a2aclient.Client, *a2a.AgentCard) {
	t.Helper()
	hc := http.DefaultClient
	if sub != "" {
		hc = &http.Client{Transport: bearer{sub}}
	}
	card, err := agentcard.NewResolver(hc).Resolve(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	c, err := a2aclient.NewFromCard(t.Context(), card, a2aclient.WithJSONRPCTransport(hc))
	if err != nil {
		t.Fatal(err)
	}
	return c, card
}

func send(t *testing.T, c *a2aclient.Client, msg *a2a.Message) *a2a.Task {
	t.Helper()
	res, err := c.SendMessage(t.Context(), &a2a.SendMessageRequest{Message: msg})
	if err != nil {
		t.Fatalf("SendMessage: %v", err)
	}
	task, ok := res.(*a2a.Task)
	if !ok {
		t.Fatalf("SendMessage answered %T, not a task", res)
	}
	return task
}

func textOf(parts a2a.ContentParts) string {
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text())
	}
	return b.String()
}

func lastArtifact(t *a2a.Task) string {
	if len(t.Artifacts) == 0 {
		return ""
	}
	return textOf(t.Artifacts[len(t.Artifacts)-1].Parts)
}

// interruptsOf reads the interrupts a task that waits for input lists.
func interruptsOf(t *testing.T, task *a2a.Task) []map[string]any {
	t.Helper()
	if task.Status.State != a2a.TaskStateInputRequired || task.Status.Message == nil {
		t.Fatalf("task %s is %s, not waiting for input", task.ID, task.Status.State)
	}
	for _, p := range task.Status.Message.Parts {
		if d, ok := p.Data().(map[string]any); ok {
			var out []map[string]any
			list, _ := d["interrupts"].([]any)
			for _, in := range list {
				m, _ := in.(map[string]any)
				out = append(out, m)
			}
			return out
		}
	}
	t.Fatalf("task %s lists no interrupts: %+v", task.ID, task.Status.Message)
	return nil
}

// TestA2AWithTheOfficialClient: the official Go client finds the local
// run by its card, and holds a conversation with it: blocking and
// streamed tasks in one context, read again with GetTask and ListTasks;
// an approval and a question through TASK_STATE_INPUT_REQUIRED; a
// cancel; a message sent again; another owner; and bad requests.
func TestA2AWithTheOfficialClient(t *testing.T) {
	url := start(t, map[string]string{"APPROVAL_TOOLS": "calculator", "TOOLS": "calculator,ask_user", "A2A_NAME": "helper", "A2A_DESCRIPTION": "Answers questions."})
	c, card := a2aClient(t, url, "alice")

	t.Run("card", func(t *testing.T) {
		if card.Name != "helper" || !strings.HasPrefix(card.Description, "Answers questions.") || !card.Capabilities.Streaming || card.Capabilities.PushNotifications {
			t.Errorf("card %+v", card)
		}
		if len(card.SupportedInterfaces) != 1 || card.SupportedInterfaces[0].URL != url+"/a2a" ||
			card.SupportedInterfaces[0].ProtocolBinding != a2a.TransportProtocolJSONRPC || card.SupportedInterfaces[0].ProtocolVersion != a2a.Version {
			t.Errorf("interfaces %+v", card.SupportedInterfaces)
		}
		if len(card.Skills) == 0 || !strings.Contains(card.Skills[0].Description, `{"responses"`) || len(card.SecuritySchemes) != 0 {
			t.Errorf("skills %+v, security %+v", card.Skills, card.SecuritySchemes)
		}
	})

	var contextID string
	t.Run("blocking, then GetTask", func(t *testing.T) {
		task := send(t, c, a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("Hello there")))
		if task.Status.State != a2a.TaskStateCompleted || !strings.Contains(lastArtifact(task), "Hello there") || task.ContextID == "" {
			t.Fatalf("task %+v, answer %q", task.Status, lastArtifact(task))
		}
		if task.Status.Message == nil || textOf(task.Status.Message.Parts) != lastArtifact(task) {
			t.Errorf("the status message %+v is not the answer", task.Status.Message)
		}
		contextID = task.ContextID
		got, err := c.GetTask(t.Context(), &a2a.GetTaskRequest{ID: task.ID})
		if err != nil {
			t.Fatal(err)
		}
		if got.Status.State != a2a.TaskStateCompleted || lastArtifact(got) != lastArtifact(task) || got.ContextID != contextID || len(got.History) != 2 {
			t.Errorf("GetTask: %+v, %q, %d history", got.Status, lastArtifact(got), len(got.History))
		}
	})

	t.Run("streamed, in the same context", func(t *testing.T) {
		msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("And again"))
		msg.ContextID = contextID
		var kinds []string
		var streamed strings.Builder
		var id a2a.TaskID
		var final a2a.TaskState
		for ev, err := range c.SendStreamingMessage(t.Context(), &a2a.SendMessageRequest{Message: msg}) {
			if err != nil {
				t.Fatal(err)
			}
			switch e := ev.(type) {
			case *a2a.Task:
				kinds, id = append(kinds, "task"), e.ID
			case *a2a.TaskArtifactUpdateEvent:
				kinds = append(kinds, "artifact")
				streamed.WriteString(textOf(e.Artifact.Parts))
			case *a2a.TaskStatusUpdateEvent:
				kinds, final = append(kinds, "status"), e.Status.State
			}
		}
		if len(kinds) < 3 || kinds[0] != "task" || final != a2a.TaskStateCompleted || !strings.Contains(streamed.String(), "And again") {
			t.Fatalf("events %v, final %s, text %q", kinds, final, streamed.String())
		}
		got, err := c.GetTask(t.Context(), &a2a.GetTaskRequest{ID: id})
		if err != nil || got.Status.State != a2a.TaskStateCompleted || lastArtifact(got) != streamed.String() {
			t.Errorf("GetTask: %v, %+v, %q; streamed %q", err, got, lastArtifact(got), streamed.String())
		}
		list, err := c.ListTasks(t.Context(), &a2a.ListTasksRequest{ContextID: contextID})
		if err != nil || len(list.Tasks) != 2 || list.Tasks[1].ID != id {
			t.Errorf("ListTasks: %v, %+v", err, list)
		}
	})

	t.Run("approval through input-required", func(t *testing.T) {
		task := send(t, c, a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("What is 120*1.2?")))
		ins := interruptsOf(t, task)
		if len(ins) != 1 || ins[0]["tool"] != "calculator" || ins[0]["kind"] != "approval" {
			t.Fatalf("interrupts %+v", ins)
		}
		// GetTask from another request says the same.
		if got, err := c.GetTask(t.Context(), &a2a.GetTaskRequest{ID: task.ID}); err != nil || got.Status.State != a2a.TaskStateInputRequired {
			t.Fatalf("GetTask of the paused task: %v, %+v", err, got)
		}
		answer := a2a.NewMessageForTask(a2a.MessageRoleUser, task, a2a.NewDataPart(map[string]any{
			"responses": []any{map[string]any{"interrupt_id": ins[0]["id"], "approve": true}},
		}))
		done := send(t, c, answer)
		if done.ID != task.ID || done.Status.State != a2a.TaskStateCompleted || !strings.Contains(lastArtifact(done), "144") {
			t.Errorf("the answered task: %s %s %q", done.ID, done.Status.State, lastArtifact(done))
		}
		// The same answer sent again replays it.
		again := send(t, c, answer)
		if again.ID != done.ID || lastArtifact(again) != lastArtifact(done) {
			t.Errorf("the answer sent again: %s %q", again.ID, lastArtifact(again))
		}
	})

	t.Run("a question answered with text", func(t *testing.T) {
		task := send(t, c, a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart(`/tool ask_user {"question": "Which account?"}`)))
		if ins := interruptsOf(t, task); len(ins) != 1 || ins[0]["kind"] != "question" || !strings.Contains(textOf(task.Status.Message.Parts), "Which account?") {
			t.Fatalf("interrupts %+v, message %+v", ins, task.Status.Message)
		}
		done := send(t, c, a2a.NewMessageForTask(a2a.MessageRoleUser, task, a2a.NewTextPart("savings")))
		if done.Status.State != a2a.TaskStateCompleted || !strings.Contains(lastArtifact(done), "savings") {
			t.Errorf("the answered task: %s %q", done.Status.State, lastArtifact(done))
		}
	})

	t.Run("cancel", func(t *testing.T) {
		task := send(t, c, a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("What is 2*21?")))
		interruptsOf(t, task)
		canceled, err := c.CancelTask(t.Context(), &a2a.CancelTaskRequest{ID: task.ID})
		if err != nil || canceled.Status.State != a2a.TaskStateCanceled {
			t.Fatalf("CancelTask: %v, %+v", err, canceled)
		}
		if got, err := c.GetTask(t.Context(), &a2a.GetTaskRequest{ID: task.ID}); err != nil || got.Status.State != a2a.TaskStateCanceled {
			t.Errorf("GetTask of the canceled task: %v, %+v", err, got)
		}
		if _, err := c.CancelTask(t.Context(), &a2a.CancelTaskRequest{ID: task.ID}); !errors.Is(err, a2a.ErrTaskNotCancelable) {
			t.Errorf("a second cancel: %v; want TaskNotCancelable", err)
		}
		msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("Hello after the cancel"))
		msg.ContextID = task.ContextID
		if next := send(t, c, msg); next.Status.State != a2a.TaskStateCompleted {
			t.Errorf("the next task: %+v", next.Status)
		}
	})

	t.Run("another owner", func(t *testing.T) {
		mine := send(t, c, a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("mine")))
		other, _ := a2aClient(t, url, "mallory")
		if _, err := other.GetTask(t.Context(), &a2a.GetTaskRequest{ID: mine.ID}); !errors.Is(err, a2a.ErrTaskNotFound) {
			t.Errorf("GetTask of another's task: %v; want TaskNotFound", err)
		}
		if _, err := other.CancelTask(t.Context(), &a2a.CancelTaskRequest{ID: mine.ID}); !errors.Is(err, a2a.ErrTaskNotFound) {
			t.Errorf("CancelTask of another's task: %v; want TaskNotFound", err)
		}
		msg := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("let me in"))
		msg.ContextID = mine.ContextID
		if _, err := other.SendMessage(t.Context(), &a2a.SendMessageRequest{Message: msg}); err == nil {
			t.Error("a message to another's context was taken")
		}
		list, err := other.ListTasks(t.Context(), &a2a.ListTasksRequest{})
		if err != nil || len(list.Tasks) != 0 {
			t.Errorf("ListTasks of another owner: %v, %+v", err, list)
		}
	})

	t.Run("bad requests", func(t *testing.T) {
		ctx := t.Context()
		tests := []struct {
			name string
			do   func(context.Context) error
			want error
		}{
			{"an agent's message", func(ctx context.Context) error {
				_, err := c.SendMessage(ctx, &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleAgent, a2a.NewTextPart("hi"))})
				return err
			}, a2a.ErrInvalidParams},
			{"a url part", func(ctx context.Context) error {
				_, err := c.SendMessage(ctx, &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewFileURLPart("http://169.254.169.254/", "text/plain"))})
				return err
			}, a2a.ErrUnsupportedContentType},
			{"returnImmediately", func(ctx context.Context) error {
				_, err := c.SendMessage(ctx, &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart("hi")), Config: &a2a.SendMessageConfig{ReturnImmediately: true}})
				return err
			}, a2a.ErrUnsupportedOperation},
			{"an unknown task", func(ctx context.Context) error {
				_, err := c.GetTask(ctx, &a2a.GetTaskRequest{ID: "bm90IGEgdGFzaw"})
				return err
			}, a2a.ErrTaskNotFound},
			{"responses without a task", func(ctx context.Context) error {
				_, err := c.SendMessage(ctx, &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewDataPart(map[string]any{"responses": []any{map[string]any{"interrupt_id": "x", "approve": true}}}))})
				return err
			}, a2a.ErrInvalidParams},
			{"SubscribeToTask", func(ctx context.Context) error {
				for _, err := range c.SubscribeToTask(ctx, &a2a.SubscribeToTaskRequest{ID: "x"}) {
					return err
				}
				return nil
			}, a2a.ErrUnsupportedOperation},
			{"a push config", func(ctx context.Context) error {
				_, err := c.CreateTaskPushConfig(ctx, &a2a.PushConfig{TaskID: "x", URL: "https://example.com/hook"})
				return err
			}, a2a.ErrUnsupportedOperation},
		}
		for _, tt := range tests {
			if err := tt.do(ctx); !errors.Is(err, tt.want) {
				t.Errorf("%s: %v; want %v", tt.name, err, tt.want)
			}
		}
	})
}

// TestDocsA2AExample runs the example of docs/a2a.md as written: the
// local run it starts, with the environment it names, and each of its
// curl commands in order; each answer must hold what the docs show after
// it, piece by piece between the docs' elisions (...), once the times
// that differ from run to run are set aside.
func TestDocsA2AExample(t *testing.T) {
	section, err := testkit.DocSection("docs/a2a.md", "## An example")
	if err != nil {
		t.Fatal(err)
	}
	env, addr := localRunCommand(t, section)
	if env["APPROVAL_TOOLS"] != "calculator" || addr == "" {
		t.Fatalf("the section starts the local run with %v on %q", env, addr)
	}
	base := start(t, env)
	shown := answersShown(section)
	curls := curlsIn(t, section, "http://"+addr)
	if len(curls) != 6 || len(shown) != len(curls) {
		t.Fatalf("%d curl commands and %d answers in the section", len(curls), len(shown))
	}
	times := regexp.MustCompile(`"(timestamp|expires_at)":"[^"]*"`)
	for i, c := range curls {
		status, body := c.send(t, strings.Replace(c.url, "http://"+addr, base, 1))
		if status != http.StatusOK {
			t.Errorf("%s\n→ %d %s", c.line, status, body)
			continue
		}
		// The run listens elsewhere than the docs' address.
		body = times.ReplaceAllString(strings.ReplaceAll(body, strings.TrimPrefix(base, "http://"), addr), `"$1":"…"`)
		for _, piece := range shown[i] {
			if piece = times.ReplaceAllString(piece, `"$1":"…"`); !strings.Contains(body, piece) {
				t.Errorf("%s\nanswers\n%s\nwhich does not hold what the docs show:\n%s", c.line, body, piece)
			}
		}
	}
}

// answersShown returns, for each curl command of section, the pieces of
// the answer the code block after it shows, between its elisions: "..."
// and the "[...]" and "{...}" of a stream's lines; none for a command
// whose answer is not shown.
func answersShown(section string) [][]string {
	var out [][]string
	elision := regexp.MustCompile(`\[\.\.\.\]|\{\.\.\.\}|(, )?\.\.\.(, )?`)
	blocks := strings.Split(section, "```")
	for i := 1; i < len(blocks); i += 2 {
		lang, body, _ := strings.Cut(blocks[i], "\n")
		switch {
		case lang == "sh" && strings.Contains(body, "curl "):
			out = append(out, nil)
		case (lang == "json" || lang == "text") && len(out) > 0:
			for line := range strings.Lines(body) {
				for _, piece := range elision.Split(strings.TrimSpace(line), -1) {
					if piece = strings.TrimSpace(piece); piece != "" {
						out[len(out)-1] = append(out[len(out)-1], piece)
					}
				}
			}
		}
	}
	return out
}

// TestA2AAgentCallsAnother: one local run calls another as a tool of its
// own, named in A2A_AGENTS by its card, or by the -a2a flag with its base
// URL: the model's call reaches the other agent through the official
// SDK's client, and its answer comes back as the tool's result, which the
// first agent's answer reports. The other agent keeps the conversation.
func TestA2AAgentCallsAnother(t *testing.T) {
	helper := start(t, map[string]string{"A2A_NAME": "helper", "A2A_DESCRIPTION": "Echoes what it is told."})
	byEnv := start(t, map[string]string{
		"A2A_AGENTS": `[{"name":"helper","card_url":"` + helper + `/.well-known/agent-card.json"}]`,
	})
	byFlag, out := startRun(t, devrun.Options{A2A: []string{helper}, Getenv: func(string) string { return "" }})
	if !strings.Contains(out.String(), "the tool a2a calls the agent whose card is "+helper+"/.well-known/agent-card.json") {
		t.Errorf("the local run does not say it calls the helper:\n%s", out.String())
	}
	var contextID string
	for i, run := range []struct{ url, tool string }{{byEnv, "helper"}, {byFlag, "a2a"}} {
		c, _ := a2aClient(t, run.url, "alice")
		text := fmt.Sprintf("ping %d from alice", i)
		task := send(t, c, a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart(`/tool `+run.tool+` {"message":"`+text+`"}`)))
		if task.Status.State != a2a.TaskStateCompleted || !strings.Contains(lastArtifact(task), text) {
			t.Fatalf("%s: task %s, answer %q", run.tool, task.Status.State, lastArtifact(task))
		}
		if i == 0 {
			// A follow-up in the same session goes on with the helper's
			// conversation, whose context the session keeps.
			next := a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart(`/tool helper {"message":"and again"}`))
			next.ContextID = task.ContextID
			if again := send(t, c, next); !strings.Contains(lastArtifact(again), "and again") {
				t.Fatalf("the follow-up: %q", lastArtifact(again))
			}
		}
	}
	// The helper holds the conversations it was sent, under the caller's
	// anonymous owner there: the first two in one context.
	other, _ := a2aClient(t, helper, "")
	list, err := other.ListTasks(t.Context(), &a2a.ListTasksRequest{IncludeArtifacts: true})
	if err != nil || len(list.Tasks) != 2 {
		t.Fatalf("the helper's sessions: %v, %+v", err, list)
	}
	for _, task := range list.Tasks {
		if strings.Contains(lastArtifact(task), "and again") {
			contextID = task.ContextID
		}
	}
	tasks, err := other.ListTasks(t.Context(), &a2a.ListTasksRequest{ContextID: contextID})
	if err != nil || len(tasks.Tasks) != 2 {
		t.Fatalf("the helper's tasks in the follow-up's context: %v, %+v", err, tasks)
	}
}

// TestA2ARemoteQuestionPausesTheTurn: a remote agent that needs more from
// the person (its task is TASK_STATE_INPUT_REQUIRED) pauses the calling
// agent's turn on a question that shows the remote question; the person's
// answer, in a later request, goes back to the remote agent's task, whose
// answer is the tool's result.
func TestA2ARemoteQuestionPausesTheTurn(t *testing.T) {
	helper := start(t, map[string]string{"TOOLS": "ask_user"})
	url := start(t, map[string]string{"A2A_AGENTS": `[{"name":"helper","card_url":"` + helper + `/.well-known/agent-card.json"}]`})
	c, _ := a2aClient(t, url, "alice")
	task := send(t, c, a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart(`/tool helper {"message":"/tool ask_user {\"question\":\"Which account?\"}"}`)))
	ins := interruptsOf(t, task)
	if len(ins) != 1 || ins[0]["name"] != "asked" || ins[0]["kind"] != "question" || ins[0]["tool"] != "helper" || !strings.Contains(ins[0]["reason"].(string), "The agent helper asks: Which account?") {
		t.Fatalf("interrupts %+v", ins)
	}
	done := send(t, c, a2a.NewMessageForTask(a2a.MessageRoleUser, task, a2a.NewTextPart("savings")))
	if done.Status.State != a2a.TaskStateCompleted || !strings.Contains(lastArtifact(done), "savings") {
		t.Fatalf("the answered task: %s %q", done.Status.State, lastArtifact(done))
	}
	// The helper's task took the answer, and completed.
	other, _ := a2aClient(t, helper, "")
	list, err := other.ListTasks(t.Context(), &a2a.ListTasksRequest{IncludeArtifacts: true})
	if err != nil || len(list.Tasks) != 1 || list.Tasks[0].Status.State != a2a.TaskStateCompleted || !strings.Contains(lastArtifact(list.Tasks[0]), "savings") {
		t.Fatalf("the helper's task: %v, %+v", err, list)
	}
}

// TestA2ARemoteAnswerStreams: a remote agent whose card says it streams
// answers through SendStreamingMessage, and what it writes shows, as it
// comes, in the caller's stream: tool_progress events on POST
// /chat/stream, and working status updates on A2A's own stream.
func TestA2ARemoteAnswerStreams(t *testing.T) {
	helper := start(t, nil)
	url := start(t, map[string]string{"A2A_AGENTS": `[{"name":"helper","card_url":"` + helper + `/.well-known/agent-card.json"}]`})
	req, _ := http.NewRequest(http.MethodPost, url+"/chat/stream", strings.NewReader(`{"message":"/tool helper {\"message\":\"tell me a long story about streams\"}"}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	var progress strings.Builder
	events := 0
	for _, block := range strings.Split(string(body), "\n\n") {
		if !strings.HasPrefix(block, "event: tool_progress\n") {
			continue
		}
		var d struct{ ID, Name, Delta string }
		if err := json.Unmarshal([]byte(strings.TrimPrefix(block, "event: tool_progress\ndata: ")), &d); err != nil || d.Name != "helper" || d.ID == "" {
			t.Fatalf("a tool_progress event: %v %q", err, block)
		}
		events++
		progress.WriteString(d.Delta)
	}
	if events < 2 || !strings.Contains(progress.String(), "tell me a long story about streams") || !strings.Contains(string(body), "event: done") {
		t.Fatalf("%d tool_progress events, %q:\n%s", events, progress.String(), body)
	}
	if strings.Index(string(body), "event: tool_progress") > strings.Index(string(body), "event: tool_result") {
		t.Errorf("progress after the result:\n%s", body)
	}

	c, _ := a2aClient(t, url, "alice")
	working := 0
	for ev, err := range c.SendStreamingMessage(t.Context(), &a2a.SendMessageRequest{Message: a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart(`/tool helper {"message":"stream it"}`))}) {
		if err != nil {
			t.Fatal(err)
		}
		if u, ok := ev.(*a2a.TaskStatusUpdateEvent); ok && u.Status.Message != nil {
			for _, p := range u.Status.Message.Parts {
				if d, ok := p.Data().(map[string]any); ok && d["tool_progress"] != nil {
					working++
				}
			}
		}
	}
	if working < 2 {
		t.Errorf("%d working updates with the remote agent's progress", working)
	}
}

// TestA2ARemoteAgentThatMisbehaves: a remote agent whose card is sound but
// whose answers are garbage is an error result for the model, and one
// that is not there at all is left out; either way the turn completes, and
// the session stays one Bedrock takes.
func TestA2ARemoteAgentThatMisbehaves(t *testing.T) {
	var base string
	garbage := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/.well-known/agent-card.json" {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"name":"bad","description":"Answers garbage.","version":"1","supportedInterfaces":[{"url":%q,"protocolBinding":"JSONRPC","protocolVersion":"1.0"}],"capabilities":{},"defaultInputModes":[],"defaultOutputModes":[],"skills":[]}`, base+"/a2a")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"jsonrpc":"2.0","id":1,"result":{"task":{"id":7,"status":"nope"}}}`)
	}))
	t.Cleanup(garbage.Close)
	base = garbage.URL
	url := start(t, map[string]string{"A2A_AGENTS": `[{"name":"bad","card_url":"` + base + `/.well-known/agent-card.json"},{"name":"gone","card_url":"http://127.0.0.1:1/.well-known/agent-card.json"}]`})
	c, _ := a2aClient(t, url, "alice")
	for _, tool := range []string{"bad", "gone"} {
		task := send(t, c, a2a.NewMessage(a2a.MessageRoleUser, a2a.NewTextPart(`/tool `+tool+` {"message":"hello"}`)))
		if task.Status.State != a2a.TaskStateCompleted {
			t.Fatalf("%s: the task %s", tool, task.Status.State)
		}
		stored := storedAs(t, url, task.ContextID)
		if err := agent.ValidateHistory(stored); err != nil {
			t.Errorf("%s: %v", tool, err)
		}
		var result *agent.ToolResultBlock
		for _, m := range stored {
			for _, b := range m.Content {
				if b.ToolResult != nil {
					result = b.ToolResult
				}
			}
		}
		if tool == "bad" && (result == nil || result.Status != agent.ToolError || !strings.Contains(result.Content[0].Text, "bad")) {
			t.Errorf("bad: the tool's result %+v", result)
		}
		// An agent whose card cannot be fetched is left out: the model is
		// not offered it, and nothing calls it.
		if tool == "gone" && result != nil && result.Status != agent.ToolError {
			t.Errorf("gone: the tool's result %+v", result)
		}
	}
}

// storedAs reads a session's messages as its caller, alice.
func storedAs(t *testing.T, base, id string) []agent.Message {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, base+"/sessions/"+id+"?limit=1000", nil)
	resp, err := (&http.Client{Transport: bearer{"alice"}}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var page struct{ Messages []agent.Message }
	if err := json.NewDecoder(resp.Body).Decode(&page); err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET the session: %d %v", resp.StatusCode, err)
	}
	return page.Messages
}

package bedrock_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/agent/bedrock"
	"github.com/lambda-agent/lambda-agent/internal/testkit/conversetest"
)

func TestConverseStreamAssemblesWhatConverseReturns(t *testing.T) {
	reply := conversetest.Text("Let me compute — à la carte.").
		WithToolUse("c1", "calculator", map[string]any{"expression": "21 * 21"}).
		WithReasoning("Arithmetic: use the tool.", "sig").
		WithUsage(20, 11)
	s := newServer(t)
	s.Enqueue(reply, reply.WithChunking(3, 0))
	m := newModel(t, s, "m")
	req := &agent.ModelRequest{
		Messages: []agent.Message{agent.UserText("What is 21*21?")},
		Tools:    []agent.ToolSpec{{Name: "calculator", InputSchema: []byte(`{"type":"object"}`)}},
	}
	want, err := m.Converse(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	var pieces []string
	got, err := m.ConverseStream(t.Context(), req, func(d agent.Delta) { pieces = append(pieces, d.Text) })
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want.Message, got.Message); diff != "" {
		t.Errorf("streamed message (-Converse +ConverseStream):\n%s", diff)
	}
	if got.StopReason != agent.StopToolUse || got.StopReason != want.StopReason || got.Usage != want.Usage || got.Usage.InputTokens != 20 {
		t.Errorf("stop %s, usage %+v; Converse's: stop %s, usage %+v", got.StopReason, got.Usage, want.StopReason, want.Usage)
	}
	if len(pieces) < 5 || strings.Join(pieces, "") != "Let me compute — à la carte." {
		t.Errorf("pieces %q", pieces)
	}
	if r := s.Requests(); r[1].Operation != "ConverseStream" {
		t.Errorf("operation %s", r[1].Operation)
	}
}

func TestConverseStreamClassifiesExceptionsInTheStream(t *testing.T) {
	tests := []struct {
		code string
		want agent.ErrorKind
	}{
		{conversetest.CodeThrottling, agent.KindThrottled},
		{conversetest.CodeModelStreamError, agent.KindUnavailable},
		{conversetest.CodeValidation, agent.KindInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.code, func(t *testing.T) {
			s := newServer(t)
			s.Enqueue(conversetest.Text("This will break off").WithChunking(4, 0).WithStreamError(3, tt.code, "broke"))
			m := newModel(t, s, "m")
			var streamed string
			_, err := m.ConverseStream(t.Context(), &agent.ModelRequest{Messages: []agent.Message{agent.UserText("hi")}}, func(d agent.Delta) { streamed += d.Text })
			if !agent.IsModelError(err, tt.want) {
				t.Errorf("err = %v, want kind %s", err, tt.want)
			}
			if streamed != "This wil" {
				t.Errorf("streamed %q before the exception", streamed)
			}
		})
	}
}

func TestConverseStreamGuardrailIsSync(t *testing.T) {
	s := newServer(t)
	m, err := bedrock.New(s.Client(), bedrock.Config{ModelID: "m", Guardrail: &bedrock.Guardrail{ID: "gr-1", Version: "DRAFT"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.ConverseStream(t.Context(), &agent.ModelRequest{Messages: []agent.Message{agent.UserText("hi")}}, func(agent.Delta) {}); err != nil {
		t.Fatal(err)
	}
	if g := s.Requests()[0].GuardrailConfig; g == nil || g.GuardrailIdentifier != "gr-1" || g.StreamProcessingMode != "sync" {
		t.Errorf("guardrail %+v, want gr-1 in sync mode", g)
	}
}

// The SDK's REST JSON protocol keeps one event-stream decoder, and its
// buffer, per client. Streams that share a client must not share it: each
// answer arrives whole and only to its own caller.
func TestConverseStreamsShareAClient(t *testing.T) {
	const n = 8
	s := newServer(t)
	want := make(map[string]bool, n)
	for i := range n {
		text := fmt.Sprintf("answer %d of several streamed at once", i)
		want[text] = true
		s.Enqueue(conversetest.Text(text).WithChunking(2, 0))
	}
	m := newModel(t, s, "m")
	got := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			var pieces strings.Builder
			resp, err := m.ConverseStream(t.Context(), &agent.ModelRequest{Messages: []agent.Message{agent.UserText("hi")}}, func(d agent.Delta) { pieces.WriteString(d.Text) })
			if err != nil {
				errs[i] = err
				return
			}
			if text := resp.Message.Text(); text != pieces.String() {
				errs[i] = fmt.Errorf("assembled %q, streamed %q", text, pieces.String())
			}
			got[i] = resp.Message.Text()
		})
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Errorf("stream %d: %v", i, errs[i])
		} else if !want[got[i]] {
			t.Errorf("stream %d answered %q, which no reply was", i, got[i])
		}
		delete(want, got[i])
	}
	if len(want) != 0 {
		t.Errorf("replies no stream received: %v", want)
	}
}

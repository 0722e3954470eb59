package remote_test

import (
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/lambda-agent/lambda-agent/internal/remote"
	"github.com/lambda-agent/lambda-agent/internal/testkit/ssmtest"
)

func TestParseA2AAgents(t *testing.T) {
	got, err := remote.ParseA2AAgents(`[
		{"name":"weather","card_url":"https://weather.example.com/.well-known/agent-card.json","description":"Asks about the weather.",
		 "headers":{"X-Team":"support"},"secret_headers":{"Authorization":"/agent/weather-token"},"agents":["planner"],"timeout_seconds":30},
		{"name":"local","card_url":"http://127.0.0.1:9999/.well-known/agent-card.json"},
		{"name":"fn","card_url":"https://abc123.lambda-url.eu-west-1.on.aws/.well-known/agent-card.json","auth":"aws_iam"}
	]`)
	if err != nil {
		t.Fatal(err)
	}
	want := []remote.A2AAgent{
		{Name: "weather", CardURL: "https://weather.example.com/.well-known/agent-card.json", Description: "Asks about the weather.",
			Headers: map[string]string{"X-Team": "support"}, SecretHeaders: map[string]string{"Authorization": "/agent/weather-token"},
			Agents: []string{"planner"}, TimeoutSeconds: 30},
		{Name: "local", CardURL: "http://127.0.0.1:9999/.well-known/agent-card.json"},
		{Name: "fn", CardURL: "https://abc123.lambda-url.eu-west-1.on.aws/.well-known/agent-card.json", Auth: "aws_iam"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("agents (-want +got):\n%s", diff)
	}
	if got[0].Timeout() != 30*time.Second || got[1].Timeout() != remote.DefaultA2ATimeout {
		t.Errorf("timeouts %s, %s", got[0].Timeout(), got[1].Timeout())
	}

	for _, tt := range []struct{ name, value, says string }{
		{"not a list", `{"name":"a"}`, "JSON list"},
		{"unknown field", `[{"name":"a","card_url":"https://x/c","url":"https://x"}]`, `unknown field "url"`},
		{"bad name", `[{"name":"a.b","card_url":"https://x/c"}]`, "name must match"},
		{"same name", `[{"name":"a","card_url":"https://x/c"},{"name":"a","card_url":"https://y/c"}]`, "a second agent"},
		{"no card", `[{"name":"a"}]`, "card_url"},
		{"plain http", `[{"name":"a","card_url":"http://agent.example.com/c"}]`, "use https"},
		{"plain http to a name", `[{"name":"a","card_url":"http://localtest.me:8080/c"}]`, "use https"},
		{"credentials in the URL", `[{"name":"a","card_url":"https://u:p@x/c"}]`, "credentials"},
		{"metadata service", `[{"name":"a","card_url":"https://169.254.169.254/c"}]`, "link-local"},
		{"private", `[{"name":"a","card_url":"https://10.1.2.3/c"}]`, "private"},
		{"private v6", `[{"name":"a","card_url":"https://[fd00::1]/c"}]`, "private"},
		{"header", `[{"name":"a","card_url":"https://x/c","headers":{"Bad Header":"v"}}]`, "not a valid HTTP header"},
		{"header twice", `[{"name":"a","card_url":"https://x/c","headers":{"A":"1"},"secret_headers":{"A":"/p"}}]`, "both"},
		{"auth", `[{"name":"a","card_url":"https://x/c","auth":"oauth"}]`, "auth must be"},
		{"iam and a header", `[{"name":"a","card_url":"https://x/c","auth":"aws_iam","headers":{"authorization":"x"}}]`, "cannot be set"},
		{"iam and a secret", `[{"name":"a","card_url":"https://x/c","auth":"aws_iam","secret_headers":{"Authorization":"/p"}}]`, "from a secret"},
		{"timeout", `[{"name":"a","card_url":"https://x/c","timeout_seconds":901}]`, "timeout_seconds"},
		{"negative timeout", `[{"name":"a","card_url":"https://x/c","timeout_seconds":-1}]`, "timeout_seconds"},
		{"empty sub-agent", `[{"name":"a","card_url":"https://x/c","agents":[""]}]`, "empty name"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := remote.ParseA2AAgents(tt.value)
			if err == nil || !strings.Contains(err.Error(), tt.says) {
				t.Errorf("error %v, want one that says %q", err, tt.says)
			}
		})
	}

	// Every problem at once.
	_, err = remote.ParseA2AAgents(`[{"name":"a b","card_url":"ftp://x"},{"name":"ok","card_url":"https://x/c","auth":"kerberos"}]`)
	for _, want := range []string{"[0] a b: name must match", "[0] a b: card_url", "[1] ok: auth must be"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error %v does not say %q", err, want)
		}
	}
}

func TestResolveA2ASecrets(t *testing.T) {
	params := ssmtest.NewServer()
	t.Cleanup(params.Close)
	params.Put("/agent/token", "Bearer s3cret", true)
	agents, err := remote.ParseA2AAgents(`[
		{"name":"a","card_url":"https://a.example.com/c","headers":{"X-Team":"t"},"secret_headers":{"Authorization":"/agent/token"}},
		{"name":"b","card_url":"https://b.example.com/c","secret_headers":{"Authorization":"/agent/missing"}},
		{"name":"c","card_url":"https://c.example.com/c"}
	]`)
	if err != nil {
		t.Fatal(err)
	}
	got, errs := remote.ResolveA2ASecrets(t.Context(), params.Client(), agents)
	want := []remote.A2AAgent{
		{Name: "a", CardURL: "https://a.example.com/c", Headers: map[string]string{"X-Team": "t", "Authorization": "Bearer s3cret"},
			SecretHeaders: map[string]string{"Authorization": "/agent/token"}},
		{Name: "c", CardURL: "https://c.example.com/c"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("agents (-want +got):\n%s", diff)
	}
	if len(errs) != 1 || !strings.Contains(errs[0].Error(), "A2A agent b") || !strings.Contains(errs[0].Error(), "/agent/missing") {
		t.Errorf("errors %v", errs)
	}
	if agents[0].Headers["Authorization"] != "" {
		t.Error("ResolveA2ASecrets changed the agents it was given")
	}
}

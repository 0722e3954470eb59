// Package a2aclient drives an A2A server with the official JavaScript
// SDK's client, @a2a-js/sdk's ClientFactory, through Node: client.mjs
// finds the agent by its card, then sends, streams, pauses, reads and
// answers a task (Run), or cancels one and makes calls the server refuses
// (RunCancel), and prints what happened, for a Go test to judge. The npm
// package is pinned in package-lock.json; `npm ci --prefix
// internal/testkit/a2aclient` installs it (.ci/run does).
package a2aclient

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

// Result is what client.mjs saw.
type Result struct {
	// ProtocolVersion is the version of the interface the client chose
	// from the card.
	ProtocolVersion string `json:"protocolVersion"`
	Blocking        struct {
		State, Answer, ContextID string
	} `json:"blocking"`
	Streamed struct {
		Kinds       []string `json:"kinds"`
		Final, Text string
	} `json:"streamed"`
	Paused struct {
		State      string
		Interrupts []map[string]any `json:"interrupts"`
	} `json:"paused"`
	Got struct {
		State string
	} `json:"got"`
	Answered struct {
		State, Answer string
		SameTask      bool `json:"sameTask"`
	} `json:"answered"`
	// Cancel is what RunCancel saw.
	Cancel *Cancel `json:"cancel"`
	Error  string  `json:"error"`
}

// Cancel is what the "cancel" scenario saw: a task that waited for an
// approval, canceled, read again; and the calls the server refused, by
// name (cancelAgain, cancelCompleted, getUnknown, agentRole, urlPart,
// returnImmediately).
type Cancel struct {
	Paused, Canceled, Got string
	Refusals              map[string]Refusal `json:"refusals"`
}

// Refusal is how the SDK reported a call the server refused.
type Refusal struct {
	// Class is the SDK's error class, such as JsonRpcTaskNotFoundError,
	// and Name its A2A error, such as TaskNotFoundError ("no error" when
	// the call succeeded).
	Class, Name string
	// EnvelopeCode is the JSON-RPC error's code.
	EnvelopeCode int `json:"envelopeCode"`
	// Code is the code the server put in the error's data, such as
	// not_found.
	Code string
}

// dir is this package's directory, which holds client.mjs and its
// node_modules.
func dir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(file)
}

// Run runs client.mjs's "tasks" scenario against the agent whose card is
// at base's /.well-known/agent-card.json. Without Node or the npm package
// the test is skipped, and says why, unless LAMBDA_AGENT_NODE_TEST is
// set, as .ci/run sets it: then it fails.
func Run(t testing.TB, base string) Result {
	t.Helper()
	return run(t, base, "tasks")
}

// RunCancel runs client.mjs's "cancel" scenario, as Run does; the agent
// must hold the calculator's use for approval.
func RunCancel(t testing.TB, base string) Result {
	t.Helper()
	return run(t, base, "cancel")
}

func run(t testing.TB, base, scenario string) Result {
	t.Helper()
	node, err := exec.LookPath("node")
	_, modules := os.Stat(filepath.Join(dir(), "node_modules", "@a2a-js", "sdk"))
	if err != nil || modules != nil {
		if os.Getenv("LAMBDA_AGENT_NODE_TEST") != "" {
			t.Fatalf("the A2A JavaScript client tests need Node and `npm ci --prefix internal/testkit/a2aclient`: node %v, modules %v", err, modules)
		}
		t.Skip("skipped: needs Node and `npm ci --prefix internal/testkit/a2aclient` (.ci/run installs them and sets LAMBDA_AGENT_NODE_TEST)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "client.mjs", base, scenario)
	cmd.Dir = dir()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		t.Fatalf("client.mjs: %v\n%s", err, stderr.String())
	}
	var out Result
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		t.Fatalf("client.mjs printed %q: %v\n%s", stdout.String(), err, stderr.String())
	}
	return out
}

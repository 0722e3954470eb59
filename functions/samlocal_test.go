package functions_test

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/lambda-agent/lambda-agent/internal/devrun/offline"
	"github.com/lambda-agent/lambda-agent/internal/testkit"
)

// invocation is a `sam local invoke FUNCTION -e events/FILE` line of
// docs/sam-local.md.
var invocation = regexp.MustCompile(`(?m)^sam local invoke (\w+) -e (events/\S+)`)

// binaries are the template's functions (see tests/deploy) by the
// name of their package.
var binaries = map[string]string{"ChatFunction": "chat", "StructuredFunction": "structured", "ChatStreamFunction": "stream"}

// TestSamLocalInvokeAsWritten runs the sam local sequence of
// docs/sam-local.md on the built functions, in its order, with the
// environment file samconfig gives sam local, and a table made from the
// file the page creates it with.
// Only DynamoDB's address differs: the in-process one stands in for
// DynamoDB Local. Every step must succeed. tests/deploy holds the
// sequence to the template and samconfig.toml.
func TestSamLocalInvokeAsWritten(t *testing.T) {
	section, err := testkit.DocSection("docs/sam-local.md", "# `sam local invoke`")
	if err != nil {
		t.Fatal(err)
	}
	steps := invocation.FindAllStringSubmatch(section, -1)
	if len(steps) < len(binaries) {
		t.Fatalf("docs/sam-local.md invokes %d times", len(steps))
	}

	var env struct{ Parameters map[string]string }
	readJSON(t, filepath.Join("..", "events", "env.json"), &env)
	var table dynamodb.CreateTableInput
	readJSON(t, filepath.Join("..", "events", "table.json"), &table)
	backends := testkit.StartBackends(t, testkit.BackendOptions{Model: offline.NewServer, NoTable: true})
	if _, err := backends.DDB.Client().CreateTable(t.Context(), &table); err != nil {
		t.Fatalf("events/table.json: %v", err)
	}
	var extra []string
	for k, v := range env.Parameters {
		if k == "AWS_ENDPOINT_URL_DYNAMODB" {
			v = backends.DDB.URL
		}
		extra = append(extra, k+"="+v)
	}
	d := deployOn(t, backends, extra...)

	for _, s := range steps {
		fn, file := binaries[s[1]], s[2]
		if fn == "" {
			t.Fatalf("%s: no function %s", s[0], s[1])
		}
		event, err := os.ReadFile(filepath.Join("..", file))
		if err != nil {
			t.Fatal(err)
		}
		out, err := d.fns[fn].Invoke(t.Context(), event, 30*time.Second)
		if err != nil {
			t.Fatalf("%s: %v\nlogs:\n%s", s[0], err, d.fns[fn].Logs())
		}
		// A streamed answer starts with its status and headers as JSON,
		// then eight NUL bytes; a buffered one is all JSON.
		prelude, _, _ := bytes.Cut(out, make([]byte, 8))
		var resp struct {
			StatusCode int `json:"statusCode"`
		}
		if err := json.Unmarshal(prelude, &resp); err != nil || resp.StatusCode < 200 || resp.StatusCode > 299 {
			t.Errorf("%s → %s", s[0], out)
		}
	}
}

// TestMissingTableThroughTheBuiltFunction: a function whose table does not
// exist answers 500 misconfigured, naming the table and TABLE_NAME, and
// logs it once, at error level.
func TestMissingTableThroughTheBuiltFunction(t *testing.T) {
	d := deployOn(t, testkit.StartBackends(t, testkit.BackendOptions{Model: offline.NewServer, NoTable: true}))
	resp, body := d.invoke(t, "chat", "chat-continue.json")
	e, _ := body["error"].(map[string]any)
	if msg, _ := e["message"].(string); resp.StatusCode != 500 || e["code"] != "misconfigured" || !strings.Contains(msg, `"`+testkit.Table+`"`) || !strings.Contains(msg, "TABLE_NAME") {
		t.Errorf("%d %s", resp.StatusCode, resp.Body)
	}
	// The log lines travel through the process's stdout pipe, so they may
	// trail the response by a moment.
	var errorLines []string
	for deadline := time.Now().Add(5 * time.Second); len(errorLines) == 0 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		errorLines = nil
		for _, l := range strings.Split(d.fns["chat"].Logs(), "\n") {
			var rec map[string]any
			if json.Unmarshal([]byte(l), &rec) == nil && rec["level"] == "ERROR" {
				errorLines = append(errorLines, l)
			}
		}
	}
	if len(errorLines) != 1 || !strings.Contains(errorLines[0], "ResourceNotFoundException") {
		t.Errorf("error lines %q; want one, with DynamoDB's error\nlogs:\n%s", errorLines, d.fns["chat"].Logs())
	}
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

package functions_test

import (
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/lambda-agent/lambda-agent/internal/testkit"
	"github.com/lambda-agent/lambda-agent/internal/testkit/runtimetest"
)

// TestMemorySampleThroughTheBuiltFunction sends the memory function's
// sample event to the built function, as `sam local invoke MemoryFunction
// -e events/memory-stream.json` does, with memory's variables at the
// template's defaults: its init reads them, and its answer is the partial
// batch response the event source mapping reads, with no failure (the
// table does not hold the sample's session, so there is nothing to
// learn). tests/deploy holds the template's variables to the
// configuration.
func TestMemorySampleThroughTheBuiltFunction(t *testing.T) {
	bin, err := runtimetest.Build(t.Context(), "./memory", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	backends := testkit.StartBackends(t, testkit.BackendOptions{})
	env := slices.Concat(backends.Env, []string{
		"MODEL_ID=us.anthropic.claude-sonnet-4-5-20250929-v1:0",
		"ADDITIONAL_MODEL_ARNS=",
		"MEMORY=on",
		"MEMORY_IAM_OWNERS=false",
		"MEMORY_MODEL_ID=",
		"MEMORY_KINDS=",
		"MEMORY_TTL_DAYS=365",
		"AWS_LAMBDA_LOG_FORMAT=JSON",
	})
	fn, err := runtimetest.Start(t.Context(), bin, runtimetest.Config{Name: "memory", Env: env})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fn.Close() })
	event, err := os.ReadFile(filepath.Join("..", "events", "memory-stream.json"))
	if err != nil {
		t.Fatal(err)
	}
	out, err := fn.Invoke(t.Context(), event, 30*time.Second)
	if err != nil {
		t.Fatalf("%v\nlogs:\n%s", err, fn.Logs())
	}
	if got, want := string(out), `{"batchItemFailures":[]}`; got != want {
		t.Errorf("the answer is %s, want %s\nlogs:\n%s", got, want, fn.Logs())
	}
	if n := backends.Model.Calls(); n != 0 {
		t.Errorf("%d model calls for a session the table does not hold", n)
	}
}

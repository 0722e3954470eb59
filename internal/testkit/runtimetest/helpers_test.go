package runtimetest_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/lambda-agent/lambda-agent/internal/testkit"
	"github.com/lambda-agent/lambda-agent/internal/testkit/runtimetest"
)

// The binaries every test uses, built once per test binary by TestMain.
var (
	echoBin     string
	scriptedBin string
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "runtimetest")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	var echoErr, scriptedErr error
	wg.Go(func() { echoBin, echoErr = runtimetest.Build(ctx, "./echo", filepath.Join(dir, "echo")) })
	wg.Go(func() {
		scriptedBin, scriptedErr = runtimetest.Build(ctx, "./internal/scripted", filepath.Join(dir, "scripted"))
	})
	wg.Wait()
	for _, err := range []error{echoErr, scriptedErr} {
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	return m.Run()
}

// start starts bin and closes it when the test ends, checking that the
// process was reaped. The function's output goes to the test log.
func start(t *testing.T, bin string, cfg runtimetest.Config) *runtimetest.Function {
	t.Helper()
	if cfg.Output == nil {
		cfg.Output = t.Output()
	}
	f, err := runtimetest.Start(t.Context(), bin, cfg)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		// Whether the Runtime API's port still listens is not checked here:
		// the tests run in parallel, and another one may already have been
		// given the same port.
		if err := f.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		select {
		case <-f.Exited():
		default:
			t.Errorf("process %d not reaped after Close", f.Pid())
		}
	})
	return f
}

// action is an event for the scripted function.
type action struct {
	Action  string `json:"action"`
	Message string `json:"message,omitempty"`
	Code    int    `json:"code,omitempty"`
	Sleep   string `json:"sleep,omitempty"`
}

// seen is the scripted function's answer to the "context" action.
type seen struct {
	RemainingMS int64             `json:"remainingMs"`
	RequestID   string            `json:"requestId"`
	FunctionARN string            `json:"functionArn"`
	Env         map[string]string `json:"env"`
}

// mustJSON marshals v.
func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// syncBuffer is a buffer safe for concurrent use, as Config.Output.
type syncBuffer = testkit.Buffer

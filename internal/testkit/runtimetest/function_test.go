package runtimetest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/lambda-agent/lambda-agent/internal/testkit/runtimetest"
)

func TestEchoReturnsEvent(t *testing.T) {
	t.Parallel()
	f := start(t, echoBin, runtimetest.Config{})
	tests := []struct {
		name  string
		event string
		want  string
	}{
		{name: "object", event: `{"a":1,"b":[true,null,"x"]}`, want: `{"a":1,"b":[true,null,"x"]}`},
		{name: "string", event: `"hello"`, want: `"hello"`},
		{name: "number", event: `42.5`, want: `42.5`},
		{name: "html is not escaped", event: `{"h":"<b>&</b>"}`, want: `{"h":"<b>&</b>"}`},
		{name: "whitespace is compacted", event: "{ \"a\" :\n [1, 2] }", want: `{"a":[1,2]}`},
		{name: "empty event is {}", event: ``, want: `{}`},
		{name: "large", event: `"` + strings.Repeat("x", 1<<20) + `"`, want: `"` + strings.Repeat("x", 1<<20) + `"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := f.Invoke(t.Context(), []byte(tt.event), 5*time.Second)
			if err != nil {
				t.Fatalf("Invoke: %v", err)
			}
			if string(got) != tt.want {
				t.Errorf("Invoke(%.40q) = %.40q, want %.40q", tt.event, got, tt.want)
			}
		})
	}
}

func TestInvokeConcurrentCallsAreSerialized(t *testing.T) {
	t.Parallel()
	f := start(t, echoBin, runtimetest.Config{})
	const n = 16
	got := make([]string, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			resp, err := f.Invoke(t.Context(), fmt.Appendf(nil, `{"i":%d}`, i), 5*time.Second)
			got[i], errs[i] = string(resp), err
		})
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Errorf("Invoke %d: %v", i, errs[i])
		}
		if want := fmt.Sprintf(`{"i":%d}`, i); got[i] != want {
			t.Errorf("Invoke %d = %s, want %s", i, got[i], want)
		}
	}
}

func TestContextAndEnvironment(t *testing.T) {
	t.Parallel()
	f := start(t, scriptedBin, runtimetest.Config{
		Name:     "chat",
		MemoryMB: 512,
		Env:      []string{"SCRIPTED_EXTRA=yes", "AWS_REGION=eu-west-1", "TZ=Europe/Oslo"},
	})
	const timeout = 3 * time.Second
	inv, err := f.InvokeAsync(t.Context(), mustJSON(t, action{Action: "context"}), timeout)
	if err != nil {
		t.Fatalf("InvokeAsync: %v", err)
	}
	out, err := inv.Wait(t.Context())
	if err != nil {
		t.Fatalf("Wait: %v", err)
	}
	var got seen
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("response %s: %v", out, err)
	}

	// The deadline is announced in whole milliseconds, after the fetch.
	if got.RemainingMS > timeout.Milliseconds() || got.RemainingMS < timeout.Milliseconds()-500 {
		t.Errorf("remaining time seen by the function = %dms, want within 500ms under %dms", got.RemainingMS, timeout.Milliseconds())
	}
	tm := inv.Timing()
	if d := tm.Deadline.Sub(tm.Fetched); d > timeout || d <= timeout-time.Millisecond {
		t.Errorf("Timing: Deadline - Fetched = %s, want %s truncated to ms", d, timeout)
	}
	if got.RequestID != inv.RequestID() {
		t.Errorf("request id seen = %q, want %q", got.RequestID, inv.RequestID())
	}
	if want := "arn:aws:lambda:eu-west-1:123456789012:function:chat"; got.FunctionARN != want {
		t.Errorf("function ARN seen = %q, want %q", got.FunctionARN, want)
	}
	wantEnv := map[string]string{
		"AWS_LAMBDA_FUNCTION_NAME":        "chat",
		"AWS_LAMBDA_FUNCTION_VERSION":     "$LATEST",
		"AWS_LAMBDA_FUNCTION_MEMORY_SIZE": "512",
		"AWS_REGION":                      "eu-west-1",
		"AWS_DEFAULT_REGION":              "eu-west-1",
		"_HANDLER":                        "bootstrap",
		"TZ":                              "Europe/Oslo", // the caller wins
		"SCRIPTED_EXTRA":                  "yes",
		"cwd":                             "LAMBDA_TASK_ROOT",
		// HOME is not there: the test's environment is not inherited.
	}
	if diff := cmp.Diff(wantEnv, got.Env); diff != "" {
		t.Errorf("environment seen (-want +got):\n%s", diff)
	}
}

func TestFunctionFailures(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		event     action
		timeout   time.Duration
		wantType  string // of the *InvokeError; "" if none
		wantMsg   string
		wantStack bool
		wantExit  int  // code of the *ExitError; 0 if none
		wantTime  bool // ErrTimeout
		maxTime   time.Duration
		wantDead  bool // the process is gone afterwards
	}{
		{
			name:     "error",
			event:    action{Action: "error", Message: "bad input"},
			timeout:  5 * time.Second,
			wantType: "scriptedError", wantMsg: "bad input",
			maxTime: 2 * time.Second,
		},
		{
			name:     "panic",
			event:    action{Action: "panic", Message: "boom"},
			timeout:  5 * time.Second,
			wantType: "string", wantMsg: "boom", wantStack: true,
			maxTime: 2 * time.Second, wantDead: true, // aws-lambda-go exits after a panic
		},
		{
			name:     "deadline honoured",
			event:    action{Action: "wait"},
			timeout:  300 * time.Millisecond,
			wantType: "deadlineExceededError", wantMsg: "context deadline exceeded",
			maxTime: 300*time.Millisecond + runtimetest.DefaultTimeoutGrace,
		},
		{
			name:     "deadline ignored",
			event:    action{Action: "sleep", Sleep: "1m"},
			timeout:  300 * time.Millisecond,
			wantTime: true,
			maxTime:  300*time.Millisecond + runtimetest.DefaultTimeoutGrace + time.Second,
			wantDead: true,
		},
		{
			name:     "exit",
			event:    action{Action: "exit", Code: 3, Message: "giving up"},
			timeout:  30 * time.Second,
			wantExit: 3,
			maxTime:  2 * time.Second,
			wantDead: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := start(t, scriptedBin, runtimetest.Config{})
			if _, err := f.WaitReady(t.Context()); err != nil {
				t.Fatalf("WaitReady: %v", err)
			}
			begin := time.Now()
			_, err := f.Invoke(t.Context(), mustJSON(t, tt.event), tt.timeout)
			elapsed := time.Since(begin)
			if err == nil {
				t.Fatal("Invoke succeeded, want an error")
			}
			t.Logf("Invoke: %v (after %s)", err, elapsed)
			if elapsed > tt.maxTime {
				t.Errorf("Invoke took %s, want at most %s", elapsed, tt.maxTime)
			}
			// The deadline reaches the function in whole milliseconds
			// (Lambda-Runtime-Deadline-Ms), so it may end up to 1 ms early.
			if tt.event.Action == "wait" && elapsed < tt.timeout-time.Millisecond {
				t.Errorf("Invoke took %s, shorter than the timeout %s", elapsed, tt.timeout)
			}

			var ierr *runtimetest.InvokeError
			if got := errors.As(err, &ierr); got != (tt.wantType != "") {
				t.Fatalf("errors.As(%v, *InvokeError) = %v, want %v", err, got, tt.wantType != "")
			}
			if ierr != nil {
				if ierr.Type != tt.wantType || ierr.Message != tt.wantMsg {
					t.Errorf("InvokeError = %s: %s, want %s: %s", ierr.Type, ierr.Message, tt.wantType, tt.wantMsg)
				}
				if got := len(ierr.StackTrace) > 0 && string(ierr.StackTrace) != "null"; got != tt.wantStack {
					t.Errorf("InvokeError has a stack trace: %v, want %v (%s)", got, tt.wantStack, ierr.StackTrace)
				}
				if ierr.Init {
					t.Error("InvokeError.Init = true, want false")
				}
			}

			var xerr *runtimetest.ExitError
			if got := errors.As(err, &xerr); got != (tt.wantExit != 0) {
				t.Fatalf("errors.As(%v, *ExitError) = %v, want %v", err, got, tt.wantExit != 0)
			}
			if xerr != nil {
				if xerr.ExitCode() != tt.wantExit {
					t.Errorf("ExitCode() = %d, want %d", xerr.ExitCode(), tt.wantExit)
				}
				if !strings.Contains(xerr.Stderr, tt.event.Message) {
					t.Errorf("ExitError.Stderr = %q, want it to contain %q", xerr.Stderr, tt.event.Message)
				}
			}
			if got := errors.Is(err, runtimetest.ErrTimeout); got != tt.wantTime {
				t.Errorf("errors.Is(%v, ErrTimeout) = %v, want %v", err, got, tt.wantTime)
			}

			if tt.wantDead {
				select {
				case <-f.Exited():
				case <-time.After(2 * time.Second):
					t.Fatal("the process is still running")
				}
				_, err := f.Invoke(t.Context(), mustJSON(t, action{Action: "echo"}), time.Second)
				if !errors.As(err, &xerr) {
					t.Errorf("Invoke after the process ended = %v, want an *ExitError", err)
				}
				return
			}
			// The function goes on serving.
			want := mustJSON(t, action{Action: "echo", Message: "still here"})
			got, err := f.Invoke(t.Context(), want, 5*time.Second)
			if err != nil || !bytes.Equal(got, want) {
				t.Errorf("Invoke after the failure = %s, %v, want %s", got, err, want)
			}
		})
	}
}

func TestKillMidInvocationThenRestart(t *testing.T) {
	t.Parallel()
	f := start(t, scriptedBin, runtimetest.Config{})
	firstPid := f.Pid()

	inv, err := f.InvokeAsync(t.Context(), mustJSON(t, action{Action: "sleep", Sleep: "1m"}), time.Minute)
	if err != nil {
		t.Fatalf("InvokeAsync: %v", err)
	}
	select {
	case <-inv.Fetched():
	case <-time.After(10 * time.Second):
		t.Fatal("the runtime did not fetch the event")
	}
	killedAt := time.Now()
	if err := f.Kill(); err != nil {
		t.Fatalf("Kill: %v", err)
	}
	_, err = inv.Wait(t.Context())
	if d := time.Since(killedAt); d > time.Second {
		t.Errorf("Wait returned %s after Kill, want promptly", d)
	}
	var xerr *runtimetest.ExitError
	if !errors.As(err, &xerr) {
		t.Fatalf("Wait after Kill = %v, want an *ExitError", err)
	}
	if !xerr.Killed || xerr.ExitCode() != -1 || xerr.Pid != firstPid {
		t.Errorf("ExitError = %+v, want Killed, exit code -1 and pid %d", xerr, firstPid)
	}
	if got := f.Exit(); got != xerr {
		t.Errorf("Exit() = %v, want the invocation's ExitError", got)
	}
	if err := f.Kill(); err != nil {
		t.Errorf("second Kill: %v", err)
	}

	if err := f.Restart(t.Context()); err != nil {
		t.Fatalf("Restart: %v", err)
	}
	if f.Pid() == firstPid {
		t.Errorf("Pid() = %d after Restart, want a new process", f.Pid())
	}
	if f.Exit() != nil {
		t.Errorf("Exit() = %v after Restart, want nil", f.Exit())
	}
	want := mustJSON(t, action{Action: "echo", Message: "again"})
	got, err := f.Invoke(t.Context(), want, 5*time.Second)
	if err != nil || !bytes.Equal(got, want) {
		t.Errorf("Invoke after Restart = %s, %v, want %s", got, err, want)
	}
}

func TestColdStartTiming(t *testing.T) {
	t.Parallel()
	f := start(t, echoBin, runtimetest.Config{})
	readyAt, err := f.WaitReady(t.Context())
	if err != nil {
		t.Fatalf("WaitReady: %v", err)
	}
	inv, err := f.InvokeAsync(t.Context(), []byte(`{"cold":true}`), 5*time.Second)
	if err != nil {
		t.Fatalf("InvokeAsync: %v", err)
	}
	if _, err := inv.Wait(t.Context()); err != nil {
		t.Fatalf("Wait: %v", err)
	}
	tm := inv.Timing()
	instants := []struct {
		name string
		at   time.Time
	}{
		{"StartedAt", f.StartedAt()},
		{"ReadyAt", readyAt},
		{"Queued", tm.Queued},
		{"Fetched", tm.Fetched},
		{"FirstByte", tm.FirstByte},
		{"Completed", tm.Completed},
	}
	for i := 1; i < len(instants); i++ {
		prev, cur := instants[i-1], instants[i]
		if cur.at.IsZero() || cur.at.Before(prev.at) {
			t.Errorf("%s = %v, want it after %s = %v", cur.name, cur.at, prev.name, prev.at)
		}
	}
	if got := f.ReadyAt(); !got.Equal(readyAt) {
		t.Errorf("ReadyAt() = %v, want %v", got, readyAt)
	}
	coldStart := tm.Completed.Sub(f.StartedAt())
	if coldStart <= 0 || coldStart > 5*time.Second {
		t.Errorf("cold start = %s, want a plausible duration", coldStart)
	}
	t.Logf("init %s, cold start %s", readyAt.Sub(f.StartedAt()), coldStart)
}

func TestPeakRSS(t *testing.T) {
	t.Parallel()
	f := start(t, echoBin, runtimetest.Config{})
	if _, err := f.Invoke(t.Context(), []byte(`{}`), 5*time.Second); err != nil {
		t.Fatalf("Invoke: %v", err)
	}
	const lo, hi = 1 << 20, 1 << 30
	running, err := f.PeakRSS()
	if err != nil {
		t.Fatalf("PeakRSS while running: %v", err)
	}
	if running < lo || running > hi {
		t.Errorf("PeakRSS while running = %d bytes, want between %d and %d", running, lo, hi)
	}
	if err := f.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	exited, err := f.PeakRSS()
	if err != nil {
		t.Fatalf("PeakRSS after Close: %v", err)
	}
	if exited < running || exited > hi {
		t.Errorf("PeakRSS after Close = %d bytes, want between %d (while running) and %d", exited, running, hi)
	}
	t.Logf("peak RSS %d KiB while running, %d KiB at Close", running>>10, exited>>10)

	// A process that exited by itself, never read, has no figure.
	crashed := start(t, scriptedBin, runtimetest.Config{Env: []string{"SCRIPTED_INIT=crash"}})
	<-crashed.Exited()
	if n, err := crashed.PeakRSS(); err == nil {
		t.Errorf("PeakRSS of a process that exited unread = %d, want an error", n)
	}
}

func TestInitFailures(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		init     string
		wantType string // of the *InvokeError; "" for an *ExitError
		wantMsg  string
		wantExit int
	}{
		{name: "reported", init: "error", wantType: "ConfigError", wantMsg: "cannot load config"},
		{name: "crash", init: "crash", wantExit: 2, wantMsg: "scripted: init crash"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := start(t, scriptedBin, runtimetest.Config{Env: []string{"SCRIPTED_INIT=" + tt.init}})
			if _, err := f.WaitReady(t.Context()); err == nil {
				t.Error("WaitReady succeeded, want an error")
			}
			inv, err := f.InvokeAsync(t.Context(), []byte(`{"action":"echo"}`), 5*time.Second)
			if err != nil {
				t.Fatalf("InvokeAsync: %v", err)
			}
			_, err = inv.Wait(t.Context())
			if tt.wantType != "" {
				var ierr *runtimetest.InvokeError
				if !errors.As(err, &ierr) {
					t.Fatalf("Invoke = %v, want an *InvokeError", err)
				}
				want := runtimetest.InvokeError{RequestID: inv.RequestID(), Type: tt.wantType, Message: tt.wantMsg, Init: true}
				if diff := cmp.Diff(want, *ierr, cmpopts.IgnoreFields(runtimetest.InvokeError{}, "Payload")); diff != "" {
					t.Errorf("InvokeError (-want +got):\n%s", diff)
				}
				return
			}
			var xerr *runtimetest.ExitError
			if !errors.As(err, &xerr) {
				t.Fatalf("Invoke = %v, want an *ExitError", err)
			}
			if xerr.ExitCode() != tt.wantExit || xerr.Stderr != tt.wantMsg {
				t.Errorf("ExitError: code %d, stderr %q; want %d, %q", xerr.ExitCode(), xerr.Stderr, tt.wantExit, tt.wantMsg)
			}
		})
	}
}

func TestLogs(t *testing.T) {
	t.Parallel()
	var tee syncBuffer
	f := start(t, scriptedBin, runtimetest.Config{Output: &tee})
	if _, err := f.Invoke(t.Context(), mustJSON(t, action{Action: "log", Message: "hello from the handler"}), 5*time.Second); err != nil {
		t.Fatalf("Invoke: %v", err)
	}
	if err := f.Close(); err != nil { // drains the pipes
		t.Fatalf("Close: %v", err)
	}
	for _, want := range []string{"hello from the handler\n", "stderr: hello from the handler\n"} {
		if !strings.Contains(f.Logs(), want) {
			t.Errorf("Logs() = %q, want it to contain %q", f.Logs(), want)
		}
		if !strings.Contains(tee.String(), want) {
			t.Errorf("Output got %q, want it to contain %q", tee.String(), want)
		}
	}
}

func TestCloseSendsSIGTERMWhenEnabled(t *testing.T) {
	t.Parallel()
	f := start(t, scriptedBin, runtimetest.Config{
		Env:           []string{"SCRIPTED_SIGTERM=1"},
		ShutdownGrace: 200 * time.Millisecond,
	})
	if _, err := f.Invoke(t.Context(), []byte(`{"action":"echo"}`), 5*time.Second); err != nil {
		t.Fatalf("Invoke: %v", err)
	}
	if err := f.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if !strings.Contains(f.Logs(), "sigterm received") {
		t.Errorf("Logs() = %q, want the SIGTERM handler's output", f.Logs())
	}
}

func TestStreamedResponse(t *testing.T) {
	t.Parallel()
	f := start(t, scriptedBin, runtimetest.Config{Env: []string{"SCRIPTED_RUNTIME=stream"}})

	got, err := f.Invoke(t.Context(), mustJSON(t, action{Action: "echo", Message: "part2"}), 5*time.Second)
	if err != nil {
		t.Fatalf("Invoke: %v", err)
	}
	if want := "part1 part2"; string(got) != want {
		t.Errorf("streamed response = %q, want %q", got, want)
	}

	_, err = f.Invoke(t.Context(), mustJSON(t, action{Action: "stream-error", Message: "lost upstream"}), 5*time.Second)
	var ierr *runtimetest.InvokeError
	if !errors.As(err, &ierr) {
		t.Fatalf("Invoke with an error trailer = %v, want an *InvokeError", err)
	}
	if ierr.Type != "StreamError" || ierr.Message != "lost upstream" {
		t.Errorf("InvokeError = %s: %s, want StreamError: lost upstream", ierr.Type, ierr.Message)
	}
}

func TestRuntimeAPIRejectsUnknownRequests(t *testing.T) {
	t.Parallel()
	f := start(t, echoBin, runtimetest.Config{})
	inv, err := f.InvokeAsync(t.Context(), []byte(`{}`), 5*time.Second)
	if err != nil {
		t.Fatalf("InvokeAsync: %v", err)
	}
	if _, err := inv.Wait(t.Context()); err != nil {
		t.Fatalf("Wait: %v", err)
	}
	base := "http://" + f.RuntimeAPI()
	tests := []struct {
		name, method, path string
		wantStatus         int
		wantType           string
	}{
		{"response for an unknown id", "POST", "/2018-06-01/runtime/invocation/nope/response", 400, "InvalidRequestID"},
		{"error for an unknown id", "POST", "/2018-06-01/runtime/invocation/nope/error", 400, "InvalidRequestID"},
		{"second response", "POST", "/2018-06-01/runtime/invocation/" + inv.RequestID() + "/response", 400, "InvalidRequestID"},
		{"init error after init", "POST", "/2018-06-01/runtime/init/error", 403, "InvalidStateTransition"},
		{"unknown resource", "GET", "/2018-06-01/runtime/nothing", 404, ""},
		{"wrong method", "GET", "/2018-06-01/runtime/invocation/x/response", 405, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(t.Context(), tt.method, base+tt.path, strings.NewReader(`{}`))
			if err != nil {
				t.Fatal(err)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != tt.wantStatus {
				t.Errorf("%s %s: status %d, want %d (%s)", tt.method, tt.path, resp.StatusCode, tt.wantStatus, body)
			}
			if tt.wantType == "" {
				return
			}
			var got struct {
				Type string `json:"errorType"`
			}
			if err := json.Unmarshal(body, &got); err != nil || got.Type != tt.wantType {
				t.Errorf("%s %s: body %s, want errorType %s", tt.method, tt.path, body, tt.wantType)
			}
		})
	}
	// The function is unharmed.
	if got, err := f.Invoke(t.Context(), []byte(`[1]`), 5*time.Second); err != nil || string(got) != `[1]` {
		t.Errorf("Invoke after the bad requests = %s, %v, want [1]", got, err)
	}
}

func TestInvokeGivesUpBeforeFetch(t *testing.T) {
	t.Parallel()
	f := start(t, scriptedBin, runtimetest.Config{Env: []string{"SCRIPTED_INIT=slow"}})

	// Init takes 500ms: an invocation whose context ends first is withdrawn.
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	inv, err := f.InvokeAsync(ctx, []byte(`{"action":"echo"}`), 5*time.Second)
	if err != nil {
		t.Fatalf("InvokeAsync: %v", err)
	}
	<-inv.Done()
	if _, err := inv.Wait(t.Context()); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("withdrawn invocation = %v, want context.DeadlineExceeded", err)
	}
	select {
	case <-inv.Fetched():
		t.Error("the withdrawn invocation was fetched")
	default:
	}

	// An invocation waits for its turn; giving up then fails it too.
	long, err := f.InvokeAsync(t.Context(), mustJSON(t, action{Action: "sleep", Sleep: "300ms"}), 5*time.Second)
	if err != nil {
		t.Fatalf("InvokeAsync: %v", err)
	}
	<-long.Fetched()
	ctx, cancel = context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if _, err := f.Invoke(ctx, []byte(`{"action":"echo"}`), 5*time.Second); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Invoke waiting for its turn = %v, want context.DeadlineExceeded", err)
	}
	if _, err := long.Wait(t.Context()); err != nil {
		t.Errorf("the long invocation: %v", err)
	}
	if _, err := f.Invoke(t.Context(), []byte(`{"action":"echo"}`), 5*time.Second); err != nil {
		t.Errorf("Invoke after: %v", err)
	}
}

func TestInvokeAfterClose(t *testing.T) {
	t.Parallel()
	f := start(t, echoBin, runtimetest.Config{})
	if err := f.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if _, err := f.Invoke(t.Context(), []byte(`{}`), time.Second); !errors.Is(err, runtimetest.ErrClosed) {
		t.Errorf("Invoke after Close = %v, want ErrClosed", err)
	}
	if err := f.Restart(t.Context()); !errors.Is(err, runtimetest.ErrClosed) {
		t.Errorf("Restart after Close = %v, want ErrClosed", err)
	}
}

func TestBuildReportsCompilerOutput(t *testing.T) {
	t.Parallel()
	_, err := runtimetest.Build(t.Context(), "./no/such/package", t.TempDir())
	if err == nil || !strings.Contains(err.Error(), "no/such/package") {
		t.Errorf("Build of a missing package = %v, want an error naming it", err)
	}
}

func TestInvokeRejectsBadTimeout(t *testing.T) {
	t.Parallel()
	f := start(t, echoBin, runtimetest.Config{})
	if _, err := f.Invoke(t.Context(), []byte(`{}`), 0); err == nil {
		t.Error("Invoke with timeout 0 succeeded, want an error")
	}
}

// Command scripted is a Lambda function for the tests of package
// runtimetest: each event says what to do, so that one binary can succeed,
// fail, panic, overrun its deadline, exit, log, and report what it saw.
//
// The event is {"action": …, "message": …, "code": …, "sleep": …}:
//
//   - "echo" returns the event.
//   - "context" returns what the function sees: the remaining time to its
//     deadline, the request id and ARN from lambdacontext, and some of its
//     environment.
//   - "error" returns a *scriptedError with the message.
//   - "panic" panics with the message.
//   - "wait" waits for the deadline and returns ctx.Err().
//   - "sleep" sleeps for the duration "sleep", ignoring the deadline.
//   - "exit" writes the message to stderr and exits with "code".
//   - "log" writes the message to stdout and "stderr: "+message to stderr.
//
// The environment changes the process itself: SCRIPTED_INIT=crash makes
// init fail (exit 2), SCRIPTED_INIT=error makes it report an init error to
// the Runtime API and exit 1, SCRIPTED_INIT=slow makes init take 500ms,
// SCRIPTED_SIGTERM=1 enables SIGTERM (printing
// "sigterm received"), and SCRIPTED_RUNTIME=stream replaces aws-lambda-go
// with a hand-written runtime that streams its response; its "stream-error"
// action fails mid-stream through the error trailers.
package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdacontext"
)

func main() {
	switch os.Getenv("SCRIPTED_INIT") {
	case "crash":
		fmt.Fprintln(os.Stderr, "scripted: init crash")
		os.Exit(2)
	case "error":
		reportInitError()
		os.Exit(1)
	case "slow":
		time.Sleep(500 * time.Millisecond)
	}
	if os.Getenv("SCRIPTED_RUNTIME") == "stream" {
		if err := streamRuntime(); err != nil {
			fmt.Fprintln(os.Stderr, "scripted:", err)
			os.Exit(1)
		}
		return
	}
	var opts []lambda.Option
	if os.Getenv("SCRIPTED_SIGTERM") == "1" {
		opts = append(opts, lambda.WithEnableSIGTERM(func() {
			fmt.Println("sigterm received")
		}))
	}
	lambda.StartWithOptions(handle, opts...)
}

// event is what the tests send.
type event struct {
	Action  string `json:"action"`
	Message string `json:"message,omitempty"`
	Code    int    `json:"code,omitempty"`
	Sleep   string `json:"sleep,omitempty"`
}

// seen is the answer to the "context" action.
type seen struct {
	RemainingMS int64             `json:"remainingMs"`
	RequestID   string            `json:"requestId"`
	FunctionARN string            `json:"functionArn"`
	Env         map[string]string `json:"env"`
}

// scriptedError is the error of the "error" action; aws-lambda-go reports
// its type name, "scriptedError".
type scriptedError struct{ msg string }

func (e *scriptedError) Error() string { return e.msg }

func handle(ctx context.Context, ev event) (any, error) {
	switch ev.Action {
	case "echo":
		return ev, nil
	case "context":
		deadline, _ := ctx.Deadline()
		lc, _ := lambdacontext.FromContext(ctx)
		s := seen{RemainingMS: time.Until(deadline).Milliseconds(), Env: map[string]string{}}
		if lc != nil {
			s.RequestID = lc.AwsRequestID
			s.FunctionARN = lc.InvokedFunctionArn
		}
		for _, name := range []string{
			"AWS_LAMBDA_FUNCTION_NAME", "AWS_LAMBDA_FUNCTION_VERSION", "AWS_LAMBDA_FUNCTION_MEMORY_SIZE",
			"AWS_REGION", "AWS_DEFAULT_REGION", "_HANDLER", "TZ", "SCRIPTED_EXTRA", "HOME",
		} {
			if v, ok := os.LookupEnv(name); ok {
				s.Env[name] = v
			}
		}
		if wd, err := os.Getwd(); err == nil && wd == os.Getenv("LAMBDA_TASK_ROOT") {
			s.Env["cwd"] = "LAMBDA_TASK_ROOT"
		}
		return s, nil
	case "error":
		return nil, &scriptedError{ev.Message}
	case "panic":
		panic(ev.Message)
	case "wait":
		<-ctx.Done()
		return nil, ctx.Err()
	case "sleep":
		d, err := time.ParseDuration(ev.Sleep)
		if err != nil {
			return nil, err
		}
		time.Sleep(d)
		return ev, nil
	case "exit":
		fmt.Fprintln(os.Stderr, ev.Message)
		os.Exit(ev.Code)
		return nil, nil
	case "log":
		fmt.Println(ev.Message)
		fmt.Fprintln(os.Stderr, "stderr: "+ev.Message)
		return ev, nil
	default:
		return nil, fmt.Errorf("unknown action %q", ev.Action)
	}
}

// runtimeURL returns the URL of a Runtime API resource.
func runtimeURL(path string) string {
	return "http://" + os.Getenv("AWS_LAMBDA_RUNTIME_API") + "/2018-06-01/runtime/" + path
}

// reportInitError posts an init error, as a runtime whose init failed does.
func reportInitError() {
	body := `{"errorMessage":"cannot load config","errorType":"ConfigError"}`
	req, err := http.NewRequest(http.MethodPost, runtimeURL("init/error"), bytes.NewBufferString(body))
	if err != nil {
		panic(err)
	}
	req.Header.Set("Lambda-Runtime-Function-Error-Type", "Runtime.ConfigError")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Fprintln(os.Stderr, "scripted: report init error:", err)
		return
	}
	resp.Body.Close()
}

// streamRuntime is a minimal runtime that answers every event with a
// streamed response in two chunks: "part1 " and the event's message. For
// the "stream-error" action it sends the first chunk and then reports an
// error in the trailers.
func streamRuntime() error {
	for {
		resp, err := http.Get(runtimeURL("invocation/next"))
		if err != nil {
			return err
		}
		payload, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			return err
		}
		id := resp.Header.Get("Lambda-Runtime-Aws-Request-Id")
		var ev event
		if err := json.Unmarshal(payload, &ev); err != nil {
			return err
		}

		pr, pw := io.Pipe()
		req, err := http.NewRequest(http.MethodPost, runtimeURL("invocation/"+id+"/response"), pr)
		if err != nil {
			return err
		}
		req.Header.Set("Lambda-Runtime-Function-Response-Mode", "streaming")
		req.Header.Set("Content-Type", "application/octet-stream")
		req.Trailer = http.Header{
			"Lambda-Runtime-Function-Error-Type": nil,
			"Lambda-Runtime-Function-Error-Body": nil,
		}
		go func() {
			_, _ = io.WriteString(pw, "part1 ")
			time.Sleep(10 * time.Millisecond) // two chunks on the wire
			if ev.Action == "stream-error" {
				body := `{"errorMessage":"` + ev.Message + `","errorType":"StreamError"}`
				req.Trailer.Set("Lambda-Runtime-Function-Error-Type", "StreamError")
				req.Trailer.Set("Lambda-Runtime-Function-Error-Body", base64.StdEncoding.EncodeToString([]byte(body)))
			} else {
				_, _ = io.WriteString(pw, ev.Message)
			}
			pw.Close()
		}()
		resp, err = http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			return errors.New("response not accepted: " + resp.Status)
		}
	}
}

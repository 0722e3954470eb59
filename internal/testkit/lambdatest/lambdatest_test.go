package lambdatest_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/lambda/types"
	"github.com/aws/smithy-go"
	"github.com/google/go-cmp/cmp"

	"github.com/lambda-agent/lambda-agent/internal/testkit"
	"github.com/lambda-agent/lambda-agent/internal/testkit/lambdatest"
)

func newServer(t *testing.T) *lambdatest.Server {
	t.Helper()
	srv := lambdatest.NewServer()
	t.Cleanup(srv.Close)
	return srv
}

// echo answers {"got": event}.
func echo(_ context.Context, payload []byte) ([]byte, error) {
	return json.Marshal(map[string]json.RawMessage{"got": payload})
}

// functionError decodes a function error payload.
func functionError(t *testing.T, out *lambda.InvokeOutput) (errorType, errorMessage string) {
	t.Helper()
	if got := aws.ToString(out.FunctionError); got != "Unhandled" {
		t.Fatalf("FunctionError = %q, want Unhandled; payload %s", got, out.Payload)
	}
	var p struct{ ErrorType, ErrorMessage string }
	if err := json.Unmarshal(out.Payload, &p); err != nil {
		t.Fatalf("function error payload %s: %v", out.Payload, err)
	}
	return p.ErrorType, p.ErrorMessage
}

// apiError returns the error code and HTTP status of an SDK error.
func apiError(t *testing.T, err error) (code string, status int) {
	t.Helper()
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		t.Fatalf("error %v is not an API error", err)
	}
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		status = re.HTTPStatusCode()
	}
	return ae.ErrorCode(), status
}

func TestInvokeReturnsTheOutput(t *testing.T) {
	srv := newServer(t)
	srv.Register("weather", echo)
	client := srv.Client()

	out, err := client.Invoke(t.Context(), &lambda.InvokeInput{
		FunctionName: aws.String("weather"),
		Payload:      []byte(`{"city":"Oslo"}`),
	})
	if err != nil {
		t.Fatalf("Invoke: %v", err)
	}
	if out.StatusCode != http.StatusOK || out.FunctionError != nil {
		t.Errorf("StatusCode = %d, FunctionError = %v; want 200 and none", out.StatusCode, aws.ToString(out.FunctionError))
	}
	if got, want := string(out.Payload), `{"got":{"city":"Oslo"}}`; got != want {
		t.Errorf("Payload = %s, want %s", got, want)
	}
	if got := aws.ToString(out.ExecutedVersion); got != "$LATEST" {
		t.Errorf("ExecutedVersion = %q, want $LATEST", got)
	}

	// No payload is the event {}.
	out, err = client.Invoke(t.Context(), &lambda.InvokeInput{FunctionName: aws.String("weather")})
	if err != nil {
		t.Fatalf("Invoke without payload: %v", err)
	}
	if got, want := string(out.Payload), `{"got":{}}`; got != want {
		t.Errorf("Payload = %s, want %s", got, want)
	}

	if got := srv.Calls("weather"); got != 2 {
		t.Errorf("Calls = %d, want 2", got)
	}
	var got []string
	for _, r := range srv.Requests() {
		if r.RequestID == "" {
			t.Errorf("request %+v has no request id", r)
		}
		got = append(got, r.Function+" "+r.InvocationType+" "+string(r.Payload))
	}
	want := []string{`weather RequestResponse {"city":"Oslo"}`, `weather RequestResponse {}`}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Requests (-want +got):\n%s", diff)
	}
}

func TestFunctionErrors(t *testing.T) {
	tests := []struct {
		name      string
		fn        lambdatest.Function
		wantType  string
		wantError string
	}{
		{
			name:      "plain error is named by its Go type, as aws-lambda-go does",
			fn:        func(context.Context, []byte) ([]byte, error) { return nil, errors.New("no such city") },
			wantType:  "errorString",
			wantError: "no such city",
		},
		{
			name: "FunctionError chooses the type",
			fn: func(context.Context, []byte) ([]byte, error) {
				return nil, &lambdatest.FunctionError{Type: "CityNotFound", Message: "no such city"}
			},
			wantType:  "CityNotFound",
			wantError: "no such city",
		},
		{
			name:      "panic",
			fn:        func(context.Context, []byte) ([]byte, error) { panic("boom") },
			wantType:  "string",
			wantError: "boom",
		},
		{
			name: "response over 6 MB",
			fn: func(context.Context, []byte) ([]byte, error) {
				return []byte(`"` + strings.Repeat("x", lambdatest.MaxResponse-1) + `"`), nil
			},
			wantType:  "Function.ResponseSizeTooLarge",
			wantError: "Response payload size exceeded maximum allowed payload size (6291556 bytes).",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := newServer(t)
			srv.Register("tool", tt.fn)
			out, err := srv.Client().Invoke(t.Context(), &lambda.InvokeInput{FunctionName: aws.String("tool")})
			if err != nil {
				t.Fatalf("Invoke: %v", err) // a function error is no API error
			}
			if out.StatusCode != http.StatusOK {
				t.Errorf("StatusCode = %d, want 200", out.StatusCode)
			}
			gotType, gotError := functionError(t, out)
			if gotType != tt.wantType || gotError != tt.wantError {
				t.Errorf("function error = %q %q, want %q %q", gotType, gotError, tt.wantType, tt.wantError)
			}
		})
	}
}

func TestResponseAtTheLimitPasses(t *testing.T) {
	srv := newServer(t)
	srv.Register("big", func(context.Context, []byte) ([]byte, error) {
		return []byte(`"` + strings.Repeat("x", lambdatest.MaxResponse-2) + `"`), nil
	})
	out, err := srv.Client().Invoke(t.Context(), &lambda.InvokeInput{FunctionName: aws.String("big")})
	if err != nil {
		t.Fatalf("Invoke: %v", err)
	}
	if out.FunctionError != nil || len(out.Payload) != lambdatest.MaxResponse {
		t.Errorf("FunctionError = %v, %d bytes; want none and %d", aws.ToString(out.FunctionError), len(out.Payload), lambdatest.MaxResponse)
	}
}

func TestFunctionNameResolution(t *testing.T) {
	srv := newServer(t)
	srv.Register("tool", echo)
	srv.Register("tool:live", func(context.Context, []byte) ([]byte, error) { return []byte(`"live"`), nil })
	srv.Register("tool:7", func(context.Context, []byte) ([]byte, error) { return []byte(`"seven"`), nil })
	client := srv.Client()

	tests := []struct {
		name, qualifier string
		wantPayload     string
		wantVersion     string
	}{
		{name: "tool", wantPayload: `{"got":{}}`, wantVersion: "$LATEST"},
		{name: "tool:$LATEST", wantPayload: `{"got":{}}`, wantVersion: "$LATEST"},
		{name: "tool", qualifier: "$LATEST", wantPayload: `{"got":{}}`, wantVersion: "$LATEST"},
		{name: "arn:aws:lambda:us-east-1:123456789012:function:tool", wantPayload: `{"got":{}}`, wantVersion: "$LATEST"},
		{name: "arn:aws:lambda:us-east-1:123456789012:function:tool:$LATEST", wantPayload: `{"got":{}}`, wantVersion: "$LATEST"},
		{name: "123456789012:function:tool", wantPayload: `{"got":{}}`, wantVersion: "$LATEST"},
		{name: "tool:live", wantPayload: `"live"`, wantVersion: "$LATEST"},
		{name: "arn:aws:lambda:us-east-1:123456789012:function:tool", qualifier: "live", wantPayload: `"live"`, wantVersion: "$LATEST"},
		{name: "tool:7", wantPayload: `"seven"`, wantVersion: "7"},
		{name: "tool", qualifier: "7", wantPayload: `"seven"`, wantVersion: "7"},
	}
	for _, tt := range tests {
		t.Run(tt.name+"?"+tt.qualifier, func(t *testing.T) {
			in := &lambda.InvokeInput{FunctionName: aws.String(tt.name)}
			if tt.qualifier != "" {
				in.Qualifier = aws.String(tt.qualifier)
			}
			out, err := client.Invoke(t.Context(), in)
			if err != nil {
				t.Fatalf("Invoke: %v", err)
			}
			if got := string(out.Payload); got != tt.wantPayload {
				t.Errorf("Payload = %s, want %s", got, tt.wantPayload)
			}
			if got := aws.ToString(out.ExecutedVersion); got != tt.wantVersion {
				t.Errorf("ExecutedVersion = %q, want %q", got, tt.wantVersion)
			}
		})
	}
}

func TestRefusals(t *testing.T) {
	srv := newServer(t)
	srv.Register("tool", echo)
	client := srv.Client()

	tests := []struct {
		name        string
		in          lambda.InvokeInput
		wantCode    string
		wantStatus  int
		wantMessage string
		// typed checks the SDK's typed error, when Lambda's model has one.
		typed func(error) bool
	}{
		{
			name:        "unknown function",
			in:          lambda.InvokeInput{FunctionName: aws.String("nope")},
			wantCode:    "ResourceNotFoundException",
			wantStatus:  404,
			wantMessage: "Function not found: arn:aws:lambda:us-east-1:123456789012:function:nope",
			typed:       func(err error) bool { var e *types.ResourceNotFoundException; return errors.As(err, &e) },
		},
		{
			name:        "unknown alias",
			in:          lambda.InvokeInput{FunctionName: aws.String("tool:canary")},
			wantCode:    "ResourceNotFoundException",
			wantStatus:  404,
			wantMessage: "Function not found: arn:aws:lambda:us-east-1:123456789012:function:tool:canary",
			typed:       func(err error) bool { var e *types.ResourceNotFoundException; return errors.As(err, &e) },
		},
		{
			name:        "ARN in another region",
			in:          lambda.InvokeInput{FunctionName: aws.String("arn:aws:lambda:eu-west-1:123456789012:function:tool")},
			wantCode:    "ResourceNotFoundException",
			wantStatus:  404,
			wantMessage: "Functions from 'eu-west-1' are not reachable in this region ('us-east-1')",
			typed:       func(err error) bool { var e *types.ResourceNotFoundException; return errors.As(err, &e) },
		},
		{
			name:       "ARN in another account",
			in:         lambda.InvokeInput{FunctionName: aws.String("arn:aws:lambda:us-east-1:999999999999:function:tool")},
			wantCode:   "AccessDeniedException",
			wantStatus: 403,
		},
		{
			name:        "payload not JSON",
			in:          lambda.InvokeInput{FunctionName: aws.String("tool"), Payload: []byte(`{"city":`)},
			wantCode:    "InvalidRequestContentException",
			wantStatus:  400,
			wantMessage: "Could not parse request body into json: Could not parse payload into json: unexpected end of JSON input",
			typed:       func(err error) bool { var e *types.InvalidRequestContentException; return errors.As(err, &e) },
		},
		{
			name:        "qualifiers disagree",
			in:          lambda.InvokeInput{FunctionName: aws.String("tool:live"), Qualifier: aws.String("7")},
			wantCode:    "InvalidParameterValueException",
			wantStatus:  400,
			wantMessage: "The derived qualifier from the function name does not match the specified qualifier.",
			typed:       func(err error) bool { var e *types.InvalidParameterValueException; return errors.As(err, &e) },
		},
		{
			name:       "name outside the pattern",
			in:         lambda.InvokeInput{FunctionName: aws.String("my tool")},
			wantCode:   "ValidationException",
			wantStatus: 400,
		},
		{
			name:       "name too long",
			in:         lambda.InvokeInput{FunctionName: aws.String(strings.Repeat("t", 171))},
			wantCode:   "ValidationException",
			wantStatus: 400,
		},
		{
			name:       "unknown invocation type",
			in:         lambda.InvokeInput{FunctionName: aws.String("tool"), InvocationType: "Later"},
			wantCode:   "ValidationException",
			wantStatus: 400,
		},
		{
			name:        "synchronous payload over 6 MB",
			in:          lambda.InvokeInput{FunctionName: aws.String("tool"), Payload: jsonString(lambdatest.MaxPayload + 1)},
			wantCode:    "RequestEntityTooLargeException",
			wantStatus:  413,
			wantMessage: "6291457 byte payload is too large for the RequestResponse invocation type (limit 6291456 bytes)",
		},
		{
			name:        "asynchronous payload over 1 MB",
			in:          lambda.InvokeInput{FunctionName: aws.String("tool"), InvocationType: types.InvocationTypeEvent, Payload: jsonString(lambdatest.MaxEventPayload + 1)},
			wantCode:    "RequestEntityTooLargeException",
			wantStatus:  413,
			wantMessage: "1048577 byte payload is too large for the Event invocation type (limit 1048576 bytes)",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := client.Invoke(t.Context(), &tt.in)
			if err == nil {
				t.Fatal("Invoke succeeded, want an error")
			}
			code, status := apiError(t, err)
			if code != tt.wantCode || status != tt.wantStatus {
				t.Errorf("error = %s (%d), want %s (%d); %v", code, status, tt.wantCode, tt.wantStatus, err)
			}
			var ae smithy.APIError
			if errors.As(err, &ae) && tt.wantMessage != "" && ae.ErrorMessage() != tt.wantMessage {
				t.Errorf("message = %q, want %q", ae.ErrorMessage(), tt.wantMessage)
			}
			if tt.typed != nil && !tt.typed(err) {
				t.Errorf("error %T is not the SDK's typed error for %s", err, tt.wantCode)
			}
		})
	}
	if got := srv.Calls("tool"); got != 0 {
		t.Errorf("Calls = %d after refusals only, want 0", got)
	}
	if got := srv.Requests(); len(got) != 0 {
		t.Errorf("Requests = %+v, want none recorded", got)
	}
}

// jsonString is a JSON string of n bytes in all.
func jsonString(n int) []byte {
	return []byte(`"` + strings.Repeat("x", n-2) + `"`)
}

func TestPayloadAtTheLimitPasses(t *testing.T) {
	srv := newServer(t)
	srv.Register("tool", func(_ context.Context, p []byte) ([]byte, error) { return []byte(`1`), nil })
	_, err := srv.Client().Invoke(t.Context(), &lambda.InvokeInput{FunctionName: aws.String("tool"), Payload: jsonString(lambdatest.MaxPayload)})
	if err != nil {
		t.Fatalf("Invoke with a 6 MB payload: %v", err)
	}
}

func TestEventRunsInTheBackground(t *testing.T) {
	srv := newServer(t)
	got := make(chan string, 1)
	release := make(chan struct{})
	srv.Register("notify", func(_ context.Context, p []byte) ([]byte, error) {
		<-release // still running when Invoke returns
		got <- string(p)
		return nil, errors.New("dropped: nobody waits for an Event's answer")
	})

	out, err := srv.Client().Invoke(t.Context(), &lambda.InvokeInput{
		FunctionName:   aws.String("notify"),
		InvocationType: types.InvocationTypeEvent,
		Payload:        []byte(`{"to":"ops"}`),
	})
	if err != nil {
		t.Fatalf("Invoke: %v", err)
	}
	if out.StatusCode != http.StatusAccepted || len(out.Payload) != 0 || out.FunctionError != nil {
		t.Errorf("StatusCode = %d, payload %q, FunctionError %v; want 202, empty, none", out.StatusCode, out.Payload, aws.ToString(out.FunctionError))
	}
	close(release)
	select {
	case p := <-got:
		if p != `{"to":"ops"}` {
			t.Errorf("function got %s", p)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the Event invocation never ran")
	}
	if got := srv.Calls("notify"); got != 1 {
		t.Errorf("Calls = %d, want 1", got)
	}
}

func TestDryRunDoesNotRun(t *testing.T) {
	srv := newServer(t)
	srv.Register("tool", func(context.Context, []byte) ([]byte, error) {
		t.Error("a DryRun ran the function")
		return nil, nil
	})
	out, err := srv.Client().Invoke(t.Context(), &lambda.InvokeInput{
		FunctionName:   aws.String("tool"),
		InvocationType: types.InvocationTypeDryRun,
		Payload:        []byte(`{}`),
	})
	if err != nil {
		t.Fatalf("Invoke: %v", err)
	}
	if out.StatusCode != http.StatusNoContent {
		t.Errorf("StatusCode = %d, want 204", out.StatusCode)
	}
	if got := srv.Calls("tool"); got != 0 {
		t.Errorf("Calls = %d, want 0", got)
	}
	if reqs := srv.Requests(); len(reqs) != 1 || reqs[0].InvocationType != "DryRun" {
		t.Errorf("Requests = %+v, want the one DryRun", reqs)
	}
	// A DryRun still checks that the function exists.
	_, err = srv.Client().Invoke(t.Context(), &lambda.InvokeInput{FunctionName: aws.String("nope"), InvocationType: types.InvocationTypeDryRun})
	var nf *types.ResourceNotFoundException
	if !errors.As(err, &nf) {
		t.Errorf("DryRun of an unknown function: %v, want ResourceNotFoundException", err)
	}
}

func TestTimeout(t *testing.T) {
	srv := newServer(t)
	fnErr := make(chan error, 1)
	srv.RegisterWithConfig("slow", func(ctx context.Context, _ []byte) ([]byte, error) {
		<-ctx.Done()
		fnErr <- ctx.Err()
		return []byte(`"too late"`), nil
	}, lambdatest.Config{Timeout: 50 * time.Millisecond})

	out, err := srv.Client().Invoke(t.Context(), &lambda.InvokeInput{FunctionName: aws.String("slow")})
	if err != nil {
		t.Fatalf("Invoke: %v", err)
	}
	gotType, gotMessage := functionError(t, out)
	requestID, _ := awsmiddleware.GetRequestIDMetadata(out.ResultMetadata)
	if want := "RequestId: " + requestID + " Error: Task timed out after 0.05 seconds"; gotType != "Sandbox.Timedout" || gotMessage != want {
		t.Errorf("function error = %q %q, want Sandbox.Timedout %q", gotType, gotMessage, want)
	}
	if err := <-fnErr; !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("the function's context ended with %v, want DeadlineExceeded", err)
	}
}

func TestFunctionContextEndsWhenTheCallerGoesAway(t *testing.T) {
	srv := newServer(t)
	fnErr := make(chan error, 1)
	srv.RegisterWithConfig("slow", func(ctx context.Context, _ []byte) ([]byte, error) {
		<-ctx.Done()
		fnErr <- ctx.Err()
		return nil, nil
	}, lambdatest.Config{Timeout: time.Minute})

	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if _, err := srv.Client().Invoke(ctx, &lambda.InvokeInput{FunctionName: aws.String("slow")}); err == nil {
		t.Fatal("Invoke succeeded after its context ended")
	}
	select {
	case err := <-fnErr:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("the function's context ended with %v, want Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the function's context did not end when the caller went away")
	}
}

func TestReservedConcurrencyThrottles(t *testing.T) {
	srv := newServer(t)
	entered := make(chan struct{})
	release := make(chan struct{})
	srv.RegisterWithConfig("single", func(context.Context, []byte) ([]byte, error) {
		entered <- struct{}{}
		<-release
		return []byte(`"done"`), nil
	}, lambdatest.Config{ReservedConcurrency: 1})
	client := srv.Client()

	var wg sync.WaitGroup
	wg.Go(func() {
		if _, err := client.Invoke(t.Context(), &lambda.InvokeInput{FunctionName: aws.String("single")}); err != nil {
			t.Errorf("first Invoke: %v", err)
		}
	})
	<-entered
	_, err := client.Invoke(t.Context(), &lambda.InvokeInput{FunctionName: aws.String("single")})
	var tm *types.TooManyRequestsException
	if !errors.As(err, &tm) {
		t.Fatalf("second Invoke: %v, want TooManyRequestsException", err)
	}
	if tm.Reason != types.ThrottleReasonReservedFunctionConcurrentInvocationLimitExceeded || tm.ErrorMessage() != "Rate Exceeded." {
		t.Errorf("throttle = %q %q", tm.Reason, tm.ErrorMessage())
	}
	close(release)
	wg.Wait()
	if got := srv.Calls("single"); got != 1 {
		t.Errorf("Calls = %d, want 1", got)
	}
}

func TestLogTail(t *testing.T) {
	srv := newServer(t)
	srv.Register("tool", echo)
	out, err := srv.Client().Invoke(t.Context(), &lambda.InvokeInput{FunctionName: aws.String("tool"), LogType: types.LogTypeTail})
	if err != nil {
		t.Fatalf("Invoke: %v", err)
	}
	log, err := base64.StdEncoding.DecodeString(aws.ToString(out.LogResult))
	if err != nil {
		t.Fatalf("LogResult %q: %v", aws.ToString(out.LogResult), err)
	}
	for _, want := range []string{"START RequestId: ", "END RequestId: ", "REPORT RequestId: "} {
		if !bytes.Contains(log, []byte(want)) {
			t.Errorf("log %q lacks %q", log, want)
		}
	}
}

func TestUnsignedRequestsAreRefused(t *testing.T) {
	srv := newServer(t)
	srv.Register("tool", echo)
	url := srv.URL + "/2015-03-31/functions/tool/invocations"

	tests := []struct {
		name          string
		authorization string
		wantCode      string
	}{
		{name: "no signature", wantCode: "MissingAuthenticationTokenException"},
		{name: "scoped to another service", authorization: "AWS4-HMAC-SHA256 Credential=AKID/20250101/us-east-1/ssm/aws4_request, SignedHeaders=host;x-amz-date, Signature=00", wantCode: "InvalidSignatureException"},
		{name: "not SigV4", authorization: "Bearer token", wantCode: "IncompleteSignatureException"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, url, strings.NewReader(`{}`))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("X-Amz-Date", "20250101T000000Z")
			if tt.authorization != "" {
				req.Header.Set("Authorization", tt.authorization)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusForbidden || resp.Header.Get("X-Amzn-Errortype") != tt.wantCode {
				t.Errorf("got %d %s, want 403 %s", resp.StatusCode, resp.Header.Get("X-Amzn-Errortype"), tt.wantCode)
			}
		})
	}

	// The real SDK with anonymous credentials does not sign.
	client := srv.Client(func(o *lambda.Options) { o.Credentials = aws.AnonymousCredentials{} })
	_, err := client.Invoke(t.Context(), &lambda.InvokeInput{FunctionName: aws.String("tool")})
	if code, status := apiError(t, err); code != "MissingAuthenticationTokenException" || status != 403 {
		t.Errorf("anonymous Invoke: %s (%d), want MissingAuthenticationTokenException (403)", code, status)
	}
	if got := srv.Calls("tool"); got != 0 {
		t.Errorf("Calls = %d, want 0", got)
	}
}

// TestEndpointFromEnvironment shows that the standard setting alone,
// AWS_ENDPOINT_URL_LAMBDA, sends a default-configured client to the server.
func TestEndpointFromEnvironment(t *testing.T) {
	srv := newServer(t)
	srv.Register("tool", echo)
	cfg := testkit.DefaultAWSConfig(t, "eu-north-1", map[string]string{"AWS_ENDPOINT_URL_LAMBDA": srv.URL})
	client := lambda.NewFromConfig(cfg)

	out, err := client.Invoke(t.Context(), &lambda.InvokeInput{FunctionName: aws.String("tool"), Payload: []byte(`[1,2]`)})
	if err != nil {
		t.Fatalf("Invoke: %v", err)
	}
	if got, want := string(out.Payload), `{"got":[1,2]}`; got != want {
		t.Errorf("Payload = %s, want %s", got, want)
	}
	// The server answers for the region the client signed for.
	_, err = client.Invoke(t.Context(), &lambda.InvokeInput{FunctionName: aws.String("nope")})
	var nf *types.ResourceNotFoundException
	if !errors.As(err, &nf) || nf.ErrorMessage() != "Function not found: arn:aws:lambda:eu-north-1:123456789012:function:nope" {
		t.Errorf("unknown function: %v", err)
	}
	if got := srv.Calls("tool"); got != 1 {
		t.Errorf("Calls = %d, want 1", got)
	}
}

func TestRegisterRefusesWhatLambdaRefuses(t *testing.T) {
	srv := newServer(t)
	tests := []struct {
		name string
		cfg  lambdatest.Config
	}{
		{name: ""},
		{name: "my.tool"},
		{name: strings.Repeat("t", 65)},
		{name: "arn:aws:lambda:us-east-1:123456789012:function:tool"},
		{name: "tool", cfg: lambdatest.Config{Timeout: 16 * time.Minute}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Errorf("RegisterWithConfig(%q, %+v) did not panic", tt.name, tt.cfg)
				}
			}()
			srv.RegisterWithConfig(tt.name, echo, tt.cfg)
		})
	}
}

// TestClientContext: X-Amz-Client-Context reaches the function as
// lambdacontext's ClientContext; one that is not base64 JSON is refused.
func TestClientContext(t *testing.T) {
	srv := newServer(t)
	srv.Register("who", func(ctx context.Context, _ []byte) ([]byte, error) {
		lc, ok := lambdacontext.FromContext(ctx)
		if !ok {
			return nil, errors.New("no Lambda context")
		}
		return json.Marshal(lc.ClientContext.Custom)
	})
	cc := base64.StdEncoding.EncodeToString([]byte(`{"custom":{"caller":"agent"}}`))
	out, err := srv.Client().Invoke(t.Context(), &lambda.InvokeInput{FunctionName: aws.String("who"), ClientContext: aws.String(cc)})
	if err != nil || out.FunctionError != nil || string(out.Payload) != `{"caller":"agent"}` {
		t.Fatalf("%v %+v %s", err, out, out.Payload)
	}
	if got := srv.Requests()[0].ClientContext.Custom["caller"]; got != "agent" {
		t.Errorf("recorded client context %q", got)
	}
	for _, bad := range []string{"not base64!", base64.StdEncoding.EncodeToString([]byte("not json")), strings.Repeat("A", lambdatest.MaxClientContext+1)} {
		_, err := srv.Client().Invoke(t.Context(), &lambda.InvokeInput{FunctionName: aws.String("who"), ClientContext: aws.String(bad)})
		var ae smithy.APIError
		if !errors.As(err, &ae) || (ae.ErrorCode() != "InvalidRequestContentException" && ae.ErrorCode() != "ValidationException") {
			t.Errorf("client context %.20q: %v", bad, err)
		}
	}
	if n := srv.Calls("who"); n != 1 {
		t.Errorf("the function ran %d times; refused calls must not run it", n)
	}
}

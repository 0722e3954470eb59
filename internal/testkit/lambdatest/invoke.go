package lambdatest

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"regexp"
	"strconv"
	"time"

	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/lambda-agent/lambda-agent/internal/testkit/awstest"
)

// functionNamePattern is Invoke's FunctionName pattern, as Lambda's
// ValidationException quotes it.
const functionNamePattern = `(arn:(aws[a-zA-Z-]*)?:lambda:)?([a-z]{2}((-gov)|(-iso(b?)))?-[a-z]+-\d{1}:)?(\d{12}:)?(function:)?([a-zA-Z0-9-_\.]+)(:(\$LATEST|[a-zA-Z0-9-_]+))?`

var functionName = regexp.MustCompile(`^(?:arn:(?:aws[a-zA-Z-]*)?:lambda:)?(?:(?P<region>[a-z]{2}(?:(?:-gov)|(?:-iso(?:b?)))?-[a-z]+-\d{1}):)?(?:(?P<account>\d{12}):)?(?:function:)?(?P<name>[a-zA-Z0-9-_\.]+)(?::(?P<qualifier>\$LATEST|[a-zA-Z0-9-_]+))?$`)

var qualifierParam = regexp.MustCompile(`^[a-zA-Z0-9$_-]+$`)

// target is the function a request names.
type target struct {
	region, name, qualifier string
}

// arn is the function's ARN, with the qualifier if there is one.
func (t target) arn() string {
	arn := "arn:aws:lambda:" + t.region + ":" + AccountID + ":function:" + t.name
	if t.qualifier != "" {
		arn += ":" + t.qualifier
	}
	return arn
}

// executedVersion is X-Amz-Executed-Version: the version number asked for,
// else $LATEST, which aliases here point at.
func (t target) executedVersion() string {
	if _, err := strconv.Atoi(t.qualifier); err == nil {
		return t.qualifier
	}
	return "$LATEST"
}

// parseTarget resolves FunctionName and the Qualifier parameter, signed in
// region, the way Lambda does.
func parseTarget(name, qualifier string, hasQualifier bool, region string) (target, *awstest.Error) {
	if len(name) > 170 {
		return target{}, validationError("1 validation error detected: Value '%s' at 'functionName' failed to satisfy constraint: Member must have length less than or equal to 170", name)
	}
	m := functionName.FindStringSubmatch(name)
	if m == nil {
		return target{}, validationError("1 validation error detected: Value '%s' at 'functionName' failed to satisfy constraint: Member must satisfy regular expression pattern: %s", name, functionNamePattern)
	}
	t := target{region: region, name: m[functionName.SubexpIndex("name")], qualifier: m[functionName.SubexpIndex("qualifier")]}
	if hasQualifier {
		if len(qualifier) > 128 || !qualifierParam.MatchString(qualifier) {
			return target{}, validationError("1 validation error detected: Value '%s' at 'qualifier' failed to satisfy constraint: Member must satisfy regular expression pattern: (|[a-zA-Z0-9$_-]+)", qualifier)
		}
		if t.qualifier != "" && t.qualifier != qualifier {
			return target{}, &awstest.Error{Status: http.StatusBadRequest, Code: "InvalidParameterValueException",
				MessageKey: "message", Message: "The derived qualifier from the function name does not match the specified qualifier.", Fields: map[string]string{"Type": "User"}}
		}
		t.qualifier = qualifier
	}
	if r := m[functionName.SubexpIndex("region")]; r != "" && r != region {
		return target{}, &awstest.Error{Status: http.StatusNotFound, Code: "ResourceNotFoundException",
			MessageKey: "Message", Message: fmt.Sprintf("Functions from '%s' are not reachable in this region ('%s')", r, region), Fields: map[string]string{"Type": "User"}}
	}
	if a := m[functionName.SubexpIndex("account")]; a != "" && a != AccountID {
		other := "arn:aws:lambda:" + region + ":" + a + ":function:" + t.name
		return target{}, &awstest.Error{Status: http.StatusForbidden, Code: "AccessDeniedException",
			MessageKey: "Message", Message: fmt.Sprintf("User: arn:aws:iam::%s:user/local is not authorized to perform: lambda:InvokeFunction on resource: %s because no resource-based policy allows the lambda:InvokeFunction action", AccountID, other)}
	}
	return t, nil
}

// Invocation types and log types, as the API's enums spell them.
const (
	requestResponse = "RequestResponse"
	event           = "Event"
	dryRun          = "DryRun"
)

func (s *Server) serveInvoke(w http.ResponseWriter, r *http.Request) {
	id := awstest.NewRequestID()
	w.Header().Set("X-Amzn-Requestid", id)
	region, aerr := awstest.SignedRegion(r, "lambda")
	if aerr != nil {
		aerr.WriteRESTJSON(w)
		return
	}
	query := r.URL.Query()
	t, aerr := parseTarget(r.PathValue("FunctionName"), query.Get("Qualifier"), query.Has("Qualifier"), region)
	if aerr != nil {
		aerr.WriteRESTJSON(w)
		return
	}
	invocationType := r.Header.Get("X-Amz-Invocation-Type")
	switch invocationType {
	case "":
		invocationType = requestResponse
	case requestResponse, event, dryRun:
	default:
		validationError("1 validation error detected: Value '%s' at 'invocationType' failed to satisfy constraint: Member must satisfy enum value set: [Event, RequestResponse, DryRun]", invocationType).WriteRESTJSON(w)
		return
	}
	logType := r.Header.Get("X-Amz-Log-Type")
	if logType != "" && logType != "None" && logType != "Tail" {
		validationError("1 validation error detected: Value '%s' at 'logType' failed to satisfy constraint: Member must satisfy enum value set: [None, Tail]", logType).WriteRESTJSON(w)
		return
	}
	clientContext, aerr := readClientContext(r.Header.Get("X-Amz-Client-Context"))
	if aerr != nil {
		aerr.WriteRESTJSON(w)
		return
	}
	payload, aerr := readPayload(r, invocationType)
	if aerr != nil {
		aerr.WriteRESTJSON(w)
		return
	}

	s.mu.Lock()
	f := s.functions[splitKey(t.name+":"+t.qualifier)]
	if f == nil {
		s.mu.Unlock()
		notFound(t.arn()).WriteRESTJSON(w)
		return
	}
	if invocationType == requestResponse && f.cfg.ReservedConcurrency > 0 && f.inflight >= f.cfg.ReservedConcurrency {
		s.mu.Unlock()
		errTooManyRequests.WriteRESTJSON(w)
		return
	}
	s.requests = append(s.requests, Request{RequestID: id, Function: t.name, Qualifier: t.qualifier, InvocationType: invocationType, Payload: payload, ClientContext: clientContext})
	if invocationType != dryRun {
		f.calls++
	}
	if invocationType == requestResponse {
		f.inflight++
	}
	s.mu.Unlock()

	switch invocationType {
	case dryRun:
		w.WriteHeader(http.StatusNoContent)
	case event:
		// The event outlives the request, as Lambda's queue does.
		if !s.start(context.WithoutCancel(lambdacontext.NewContext(r.Context(), &lambdacontext.LambdaContext{AwsRequestID: id, ClientContext: clientContext})), f, payload, func(result) {}) {
			errClosed.WriteRESTJSON(w)
			return
		}
		w.WriteHeader(http.StatusAccepted)
	default:
		start := time.Now()
		done := make(chan result, 1)
		ctx := lambdacontext.NewContext(r.Context(), &lambdacontext.LambdaContext{AwsRequestID: id, ClientContext: clientContext})
		started := s.start(ctx, f, payload, func(res result) { done <- res })
		var res result
		if started {
			res = <-done
		}
		s.mu.Lock()
		f.inflight--
		s.mu.Unlock()
		if !started || res.canceled {
			if r.Context().Err() == nil {
				errClosed.WriteRESTJSON(w) // the server is closing
			}
			return // else the client went away: nobody to answer
		}
		writeResult(w, id, t, res, f.cfg.timeout(), logType == "Tail", time.Since(start))
	}
}

// readPayload reads the event, enforcing the size limit of the invocation
// type and Lambda's JSON check. An empty body is the event {}.
func readPayload(r *http.Request, invocationType string) (json.RawMessage, *awstest.Error) {
	limit := int64(MaxPayload)
	if invocationType == event {
		limit = MaxEventPayload
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil {
		return nil, &awstest.Error{Status: http.StatusBadRequest, Code: "InvalidRequestContentException",
			MessageKey: "message", Message: "Could not read request body: " + err.Error(), Fields: map[string]string{"Type": "User"}}
	}
	if n := int64(len(body)); n > limit {
		rest, _ := io.Copy(io.Discard, r.Body)
		return nil, tooLarge(n+rest, invocationType, limit)
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return json.RawMessage("{}"), nil
	}
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		return nil, &awstest.Error{Status: http.StatusBadRequest, Code: "InvalidRequestContentException",
			MessageKey: "message", Message: "Could not parse request body into json: Could not parse payload into json: " + err.Error(), Fields: map[string]string{"Type": "User"}}
	}
	return body, nil
}

// MaxClientContext bounds X-Amz-Client-Context, base64 as it is sent.
const MaxClientContext = 3583

// readClientContext decodes X-Amz-Client-Context: base64 of a JSON object,
// which the function gets as lambdacontext's ClientContext.
func readClientContext(header string) (lambdacontext.ClientContext, *awstest.Error) {
	var cc lambdacontext.ClientContext
	if header == "" {
		return cc, nil
	}
	invalid := &awstest.Error{Status: http.StatusBadRequest, Code: "InvalidRequestContentException",
		MessageKey: "message", Message: "Client context must be a valid Base64-encoded JSON object.", Fields: map[string]string{"Type": "User"}}
	if len(header) > MaxClientContext {
		return cc, validationError("1 validation error detected: Value at 'clientContext' failed to satisfy constraint: Member must have length less than or equal to %d", MaxClientContext)
	}
	raw, err := base64.StdEncoding.DecodeString(header)
	if err != nil || json.Unmarshal(raw, &cc) != nil {
		return cc, invalid
	}
	return cc, nil
}

// result is how an invocation ended.
type result struct {
	output   []byte
	err      error
	timedOut bool
	canceled bool // the caller went away or the server closed
}

var errTimedOut = errors.New("lambdatest: task timed out")

// start runs f in the background, bounded by its timeout and by parent,
// and calls done with the result when the function returns or its time is
// up, whichever comes first. It is false when the server is closed.
func (s *Server) start(parent context.Context, f *function, payload []byte, done func(result)) bool {
	s.mu.Lock()
	if s.isClosed {
		s.mu.Unlock()
		return false
	}
	s.running.Add(2) // the function, and its watcher
	s.mu.Unlock()

	ctx, cancel := context.WithTimeoutCause(parent, f.cfg.timeout(), errTimedOut)
	returned := make(chan result, 1)
	go func() {
		defer s.running.Done()
		returned <- call(ctx, f.fn, payload)
	}()
	go func() {
		defer s.running.Done()
		defer cancel() // Lambda stops the function once the invocation ends
		var res result
		select {
		case res = <-returned:
		case <-ctx.Done():
		case <-s.closed:
			res.canceled = true
		}
		// A function that returned because its time ran out still timed out.
		if !res.canceled && ctx.Err() != nil {
			if errors.Is(context.Cause(ctx), errTimedOut) {
				res = result{timedOut: true}
			} else {
				res = result{canceled: true}
			}
		}
		done(res)
	}()
	return true
}

// call runs fn, turning a panic into an error as aws-lambda-go reports it.
func call(ctx context.Context, fn Function, payload []byte) (res result) {
	defer func() {
		if v := recover(); v != nil {
			res = result{err: &FunctionError{Type: typeName(v), Message: fmt.Sprint(v)}}
		}
	}()
	out, err := fn(ctx, payload)
	return result{output: out, err: err}
}

// typeName is the name aws-lambda-go gives an error's or a panic's type.
func typeName(v any) string {
	t := reflect.TypeOf(v)
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t.Name()
}

// writeResult answers a synchronous invocation that ran.
func writeResult(w http.ResponseWriter, id string, t target, res result, timeout time.Duration, tail bool, took time.Duration) {
	payload := res.output
	var ferr *functionErrorPayload
	switch {
	case res.timedOut:
		ferr = &functionErrorPayload{ErrorType: "Sandbox.Timedout",
			ErrorMessage: fmt.Sprintf("RequestId: %s Error: Task timed out after %.2f seconds", id, timeout.Seconds())}
	case res.err != nil:
		var fe *FunctionError
		if errors.As(res.err, &fe) {
			ferr = &functionErrorPayload{ErrorType: fe.Type, ErrorMessage: fe.Message}
		} else {
			ferr = &functionErrorPayload{ErrorType: typeName(res.err), ErrorMessage: res.err.Error()}
		}
	case len(payload) > MaxResponse:
		ferr = &functionErrorPayload{ErrorType: "Function.ResponseSizeTooLarge",
			ErrorMessage: fmt.Sprintf("Response payload size exceeded maximum allowed payload size (%d bytes).", MaxResponse)}
	case len(payload) == 0:
		payload = []byte("null")
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Amz-Executed-Version", t.executedVersion())
	if ferr != nil {
		payload = ferr.marshal()
		h.Set("X-Amz-Function-Error", "Unhandled")
	}
	if tail {
		ms := float64(took.Microseconds()) / 1000
		log := fmt.Sprintf("START RequestId: %s Version: %s\nEND RequestId: %s\nREPORT RequestId: %s\tDuration: %.2f ms\tBilled Duration: %d ms\t\n",
			id, t.executedVersion(), id, id, ms, took.Milliseconds()+1)
		h.Set("X-Amz-Log-Result", base64.StdEncoding.EncodeToString([]byte(log)))
	}
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(payload)
}

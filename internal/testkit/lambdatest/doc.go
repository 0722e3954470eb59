// Package lambdatest is a stand-in for the AWS Lambda Invoke API: an HTTP
// server on a loopback port that speaks Lambda's wire protocol (restJson1),
// so the real lambda SDK client reaches it through BaseEndpoint or
// AWS_ENDPOINT_URL_LAMBDA and every call goes through the SDK's real
// serializer and deserializer. The functions it serves are Go functions
// registered with [Server.Register]; it is the remote end of a tool that is
// another Lambda function.
//
// # Usage
//
//	srv := lambdatest.NewServer()
//	defer srv.Close()
//	srv.Register("weather", func(ctx context.Context, payload []byte) ([]byte, error) {
//		return []byte(`{"celsius":21}`), nil
//	})
//	client := srv.Client() // *lambda.Client, retries off
//	// … run the code under test with client …
//	if srv.Calls("weather") != 1 { /* … */ }
//
// # Wire protocol
//
// POST /2015-03-31/functions/{FunctionName}/invocations, with the event as
// the body, the invocation type in X-Amz-Invocation-Type and an optional
// Qualifier query parameter. Answers, as Lambda gives them:
//
//   - RequestResponse (the default): 200 with the function's output,
//     Content-Type application/json and X-Amz-Executed-Version. An error the
//     function returns is still a 200, with X-Amz-Function-Error: Unhandled
//     and the payload {"errorMessage", "errorType"}: the type is that of a
//     [*FunctionError], else the Go type name of the error, as aws-lambda-go
//     reports it (errorString for errors.New). A panic is reported the same
//     way. LogType Tail adds X-Amz-Log-Result with START, END and REPORT
//     lines (functions have no log of their own).
//   - Event: 202 with no body; the function runs in the background.
//   - DryRun: 204 with no body; the function does not run.
//
// A refusal is an HTTP status, the error code in X-Amzn-Errortype and a JSON
// body with the message, from which the SDK builds its typed errors.
//
// # Rules enforced
//
//   - Requests carry a SigV4 Authorization header scoped to the lambda
//     service, and X-Amz-Date: otherwise 403 MissingAuthenticationTokenException,
//     IncompleteSignatureException or InvalidSignatureException. The shape is
//     checked, not the signature itself, which needs the secret key. The
//     credential scope's region is the region the server answers for.
//   - FunctionName is a name, a full ARN or a partial ARN (account:function:name),
//     optionally with :qualifier, at most 170 characters, matching Lambda's
//     pattern; otherwise 400 ValidationException. A qualifier in the name
//     that differs from the Qualifier parameter is 400
//     InvalidParameterValueException. An ARN for another region is 404
//     ResourceNotFoundException ("Functions from … are not reachable in this
//     region"); an ARN for another account than [AccountID] is 403
//     AccessDeniedException, as no resource policy grants it.
//   - X-Amz-Invocation-Type and X-Amz-Log-Type hold their enum values; else
//     400 ValidationException.
//   - The payload is at most [MaxPayload] bytes (RequestResponse, DryRun) or
//     [MaxEventPayload] bytes (Event); else 413 RequestEntityTooLargeException
//     "N byte payload is too large for the … invocation type (limit … bytes)".
//     This is the code Lambda sends (reported by SDK users since 2018); it is
//     not a modeled error, so the SDK returns a *smithy.GenericAPIError with
//     that code, inside an *awshttp.ResponseError with status 413. It is not
//     *types.RequestTooLargeException, whatever the API model suggests.
//   - The payload is JSON (any JSON value); an empty payload is the event
//     {}; else 400 InvalidRequestContentException.
//   - X-Amz-Client-Context, when sent, is base64 of a JSON object of at
//     most [MaxClientContext] bytes, else 400 InvalidRequestContentException
//     or ValidationException (the messages are ours); the function gets it
//     as lambdacontext's ClientContext, as aws-lambda-go hands it over.
//   - An unregistered function, or a qualifier that is neither $LATEST nor
//     registered, is 404 ResourceNotFoundException "Function not found: ARN".
//   - A function with [Config.ReservedConcurrency] refuses a synchronous call
//     beyond it with 429 TooManyRequestsException (Reason
//     ReservedFunctionConcurrentInvocationLimitExceeded, "Rate Exceeded.").
//   - A function runs at most [Config.Timeout] (Lambda's default, 3 seconds,
//     unless set). Past it the call answers 200, X-Amz-Function-Error:
//     Unhandled, {"errorType":"Sandbox.Timedout", "errorMessage":"RequestId:
//     ID Error: Task timed out after 3.00 seconds"}, and the function's
//     context is cancelled. Its context also ends when the client goes away
//     or the server closes.
//   - An output over [MaxResponse] bytes is replaced, as Lambda does, by the
//     function error {"errorMessage":"Response payload size exceeded maximum
//     allowed payload size (6291556 bytes).","errorType":
//     "Function.ResponseSizeTooLarge"}. An empty output is null, as a Go
//     handler that returns nothing gives.
//
// # Not modeled
//
// Versions and aliases are names only: a function registered as "name:live"
// answers the qualifier live and reports $LATEST as the executed version (an
// alias pointing at $LATEST); a numeric qualifier reports itself. Failed
// Event invocations are not retried (Lambda retries twice, after about one
// and two minutes) and Event invocations are neither queued nor throttled.
// ClientContext is passed through unchecked and not given to the function.
// There are no cold starts, memory limits, log groups, tenants, durable
// executions or response streaming (InvokeWithResponseStream).
//
// # Recording
//
// Every request that reached a registered function, DryRun included, is
// recorded with its decoded payload ([Server.Requests]); [Server.Calls]
// counts the invocations that ran a function.
package lambdatest

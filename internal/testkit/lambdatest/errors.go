package lambdatest

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/lambda-agent/lambda-agent/internal/testkit/awstest"
)

// Lambda's error bodies differ by error (Message or message, with or without
// Type), as they do in Lambda's model, so each refusal names its members.

// errClosed answers a request that arrives while the server closes.
var errClosed = &awstest.Error{Status: http.StatusInternalServerError, Code: "ServiceException",
	MessageKey: "Message", Message: "lambdatest: the server is closing", Fields: map[string]string{"Type": "Service"}}

// errTooManyRequests refuses an Invoke beyond the function's concurrency.
var errTooManyRequests = &awstest.Error{Status: http.StatusTooManyRequests, Code: "TooManyRequestsException",
	MessageKey: "message", Message: "Rate Exceeded.", Fields: map[string]string{"Reason": "ReservedFunctionConcurrentInvocationLimitExceeded", "Type": "User"}}

func validationError(format string, args ...any) *awstest.Error {
	return &awstest.Error{Status: http.StatusBadRequest, Code: "ValidationException",
		MessageKey: "message", Message: fmt.Sprintf(format, args...)}
}

func notFound(arn string) *awstest.Error {
	return &awstest.Error{Status: http.StatusNotFound, Code: "ResourceNotFoundException",
		MessageKey: "Message", Message: "Function not found: " + arn, Fields: map[string]string{"Type": "User"}}
}

func tooLarge(n int64, invocationType string, limit int64) *awstest.Error {
	return &awstest.Error{Status: http.StatusRequestEntityTooLarge, Code: "RequestEntityTooLargeException",
		MessageKey: "Message", Message: fmt.Sprintf("%d byte payload is too large for the %s invocation type (limit %d bytes)", n, invocationType, limit)}
}

// functionErrorPayload is the payload of a function error, as the Lambda
// runtimes and aws-lambda-go write it.
type functionErrorPayload struct {
	ErrorMessage string `json:"errorMessage"`
	ErrorType    string `json:"errorType"`
}

func (p functionErrorPayload) marshal() []byte {
	b, _ := json.Marshal(p) // strings always encode
	return b
}

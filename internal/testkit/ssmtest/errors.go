package ssmtest

import (
	"encoding/json"
	"fmt"
	"net/http"

	"github.com/lambda-agent/lambda-agent/internal/testkit/awstest"
)

func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("ssmtest: encode an answer: %v", err)) // only strings, numbers and slices of them
	}
	w.Header().Set("Content-Type", "application/x-amz-json-1.1")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// validationError is SSM's ValidationException, whose model spells the
// message member Message (message elsewhere).
func validationError(format string, args ...any) *awstest.Error {
	return &awstest.Error{Status: http.StatusBadRequest, Code: "ValidationException", MessageKey: "Message", Message: fmt.Sprintf(format, args...)}
}

// errNotFound is SSM's ParameterNotFound, which carries no message.
var errNotFound = &awstest.Error{Status: http.StatusBadRequest, Code: "ParameterNotFound"}

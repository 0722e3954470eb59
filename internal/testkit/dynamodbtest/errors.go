package dynamodbtest

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
)

// ErrorResponse is DynamoDB's answer to r when it fails with the error code,
// such as ThrottlingException or AccessDeniedException: what a transport in
// a test returns to make the SDK see that error.
func ErrorResponse(r *http.Request, code, message string) *http.Response {
	body, _ := json.Marshal(map[string]string{"__type": "com.amazonaws.dynamodb.v20120810#" + code, "message": message}) // strings always encode
	return &http.Response{
		StatusCode: http.StatusBadRequest,
		Header:     http.Header{"Content-Type": {"application/x-amz-json-1.0"}},
		Body:       io.NopCloser(bytes.NewReader(body)),
		Request:    r,
	}
}

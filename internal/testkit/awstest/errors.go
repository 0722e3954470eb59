package awstest

import (
	"crypto/rand"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
)

// Error is a refusal as an AWS service answers it: an HTTP status, an error
// code and a JSON body. Where the code goes depends on the protocol, so
// Error has one write method per protocol.
type Error struct {
	Status int
	Code   string
	// MessageKey is the body member that holds Message. AWS models spell
	// it "message" or "Message" depending on the error shape and service,
	// so it has no default; it may be empty only when Message is.
	MessageKey string
	// Message is left out of the body when empty, as some errors (SSM's
	// ParameterNotFound) carry none.
	Message string
	// Fields are further body members some error shapes have, such as
	// Lambda's Type and Reason.
	Fields map[string]string
}

// Error returns the code and message, for logs and test failures.
func (e *Error) Error() string {
	return e.Code + ": " + e.Message
}

// WriteRESTJSON writes e as restJson1 (Lambda) does: the code in the
// X-Amzn-Errortype header, which the SDK reads, and only the members in the
// application/json body.
func (e *Error) WriteRESTJSON(w http.ResponseWriter) {
	w.Header().Set("X-Amzn-Errortype", e.Code)
	e.write(w, "application/json", e.body())
}

// WriteJSON11 writes e as awsJson1_1 (SSM) does: the code as the body's
// __type member, in an application/x-amz-json-1.1 body.
func (e *Error) WriteJSON11(w http.ResponseWriter) {
	body := e.body()
	body["__type"] = e.Code
	e.write(w, "application/x-amz-json-1.1", body)
}

func (e *Error) body() map[string]string {
	body := make(map[string]string, len(e.Fields)+2)
	maps.Copy(body, e.Fields)
	if e.Message != "" {
		if e.MessageKey == "" {
			panic(fmt.Sprintf("awstest: error %s has a message but no MessageKey", e.Code)) // a bug in the stand-in
		}
		body[e.MessageKey] = e.Message
	}
	return body
}

func (e *Error) write(w http.ResponseWriter, contentType string, body map[string]string) {
	b, _ := json.Marshal(body) // strings always encode
	w.Header().Set("Content-Type", contentType)
	w.WriteHeader(e.Status)
	_, _ = w.Write(b)
}

// NewRequestID returns a random UUID, the form of AWS request ids.
func NewRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

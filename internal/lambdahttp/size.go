package lambdahttp

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"unicode/utf8"
)

// MaxResponseBytes is the most a buffered invocation may return: Lambda's
// limit on a synchronous response, 6 MB, which it counts on the response
// event as the runtime sends it. Past it the caller gets an error, though
// the function finished and may have committed.
const MaxResponseBytes = 6 << 20

// MaxBodyBytes is what a body may take of MaxResponseBytes, as BodySize
// counts it. The rest is room for the status, the headers and the event's
// own JSON, which a handler's few headers never fill.
const MaxBodyBytes = MaxResponseBytes - 16<<10

// BodySize returns the bytes that body takes in the response event that
// Wrap returns, as aws-lambda-go encodes it (encoding/json, HTML left
// unescaped): a JSON string, where a quote or a backslash takes two bytes
// and a control character up to six, or base64 and the flag that says so
// when body is not UTF-8. A
// body of JSON, whose strings are escaped already, can take twice its
// length or more: count this, never the body's length.
//
// For UTF-8 the count is additive: the size of a body is the sum of the
// sizes of its parts, when they are split between characters.
func BodySize(body []byte) int {
	if !utf8.Valid(body) {
		return base64.StdEncoding.EncodedLen(len(body)) + len(`,"isBase64Encoded":true`)
	}
	var c counter
	enc := json.NewEncoder(&c)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(string(body)) // a string always encodes
	return c.n - len(`""`+"\n")
}

type counter struct{ n int }

func (c *counter) Write(p []byte) (int, error) {
	c.n += len(p)
	return len(p), nil
}

// Buffered reports whether r came from an event that Lambda answers with
// one buffered response (see Wrap), whose body must fit MaxBodyBytes. A
// request from a function URL in streaming mode, or from a plain HTTP
// server, is not.
func Buffered(r *http.Request) bool {
	_, ok := RequestFromContext(r.Context())
	return ok
}

package httpapi

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/aws/aws-lambda-go/events"
	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/ddbhistory"
)

// anonymous owns the sessions of requests that name no caller, when the
// deployment allows them (RequireAuth off). It is a namespace of its own: no
// JWT subject may be it, and IAM owners all begin with iamPrefix.
const anonymous = "anonymous"

// iamPrefix begins the owners that are IAM principals. JWT subjects may not
// begin with it, so that no token can pass for a principal.
const iamPrefix = "iam:"

// maxIdempotencyKey bounds the Idempotency-Key header.
const maxIdempotencyKey = 128

// owner returns the caller's identity, which owns its sessions:
//   - a JWT that API Gateway verified: its subject, as it is;
//   - an IAM principal that API Gateway or a function URL verified: "iam:"
//     and its ARN;
//   - no identity at all, when auth is not required: anonymous.
//
// An identity that is present but names nobody (a token without a subject, a
// principal without an ARN) is refused, never taken for anonymous, and so is
// a subject that would fall in another namespace.
func (h *Handler) owner(req *events.APIGatewayV2HTTPRequest) (string, *Error) {
	unauthorized := func(format string, args ...any) *Error {
		return &Error{Status: http.StatusUnauthorized, Code: "unauthorized", Message: fmt.Sprintf(format, args...)}
	}
	var owner string
	if a := req.RequestContext.Authorizer; a != nil {
		switch {
		case a.JWT != nil:
			owner = a.JWT.Claims["sub"]
			switch {
			case owner == "":
				return "", unauthorized("the token has no subject (sub claim), so it names no caller")
			case owner == anonymous:
				return "", unauthorized("a token's subject may not be %q, the owner of unauthenticated sessions", anonymous)
			case strings.HasPrefix(owner, iamPrefix):
				return "", unauthorized("a token's subject may not begin with %q", iamPrefix)
			}
		case a.IAM != nil:
			if a.IAM.UserARN == "" {
				return "", unauthorized("the request is signed, but names no IAM principal")
			}
			owner = iamPrefix + a.IAM.UserARN
		}
	}
	switch {
	case len(owner) > ddbhistory.MaxOwnerBytes:
		return "", unauthorized("the caller's identity is longer than %d bytes", ddbhistory.MaxOwnerBytes)
	case owner != "":
		return owner, nil
	case h.cfg.RequireAuth:
		return "", unauthorized("this API requires an authenticated caller (a JWT bearer token, or an IAM-signed request), and the request named none")
	}
	return anonymous, nil
}

// header returns a request header; payload 2.0 lowercases their names, but
// events written by hand may not.
func header(req *events.APIGatewayV2HTTPRequest, name string) string {
	if v, ok := req.Headers[strings.ToLower(name)]; ok {
		return v
	}
	for k, v := range req.Headers {
		if strings.EqualFold(k, name) {
			return v
		}
	}
	return ""
}

// idempotencyKey returns the Idempotency-Key header, checked.
func idempotencyKey(req *events.APIGatewayV2HTTPRequest) (string, *Error) {
	k := header(req, "Idempotency-Key")
	if len(k) > maxIdempotencyKey {
		return "", badRequest("invalid_idempotency_key", "the Idempotency-Key header is %d characters; at most %d", len(k), maxIdempotencyKey)
	}
	for _, r := range k {
		if r < 0x21 || r > 0x7e {
			return "", badRequest("invalid_idempotency_key", "the Idempotency-Key header may hold only visible ASCII characters")
		}
	}
	return k, nil
}

// sessionID returns the session a new turn goes to: the one named, or a new
// id. With an idempotency key the new id is derived from it, so that a retry
// of the request finds the session its first attempt created.
func sessionID(named *string, owner, idemKey string) (string, *Error) {
	if named != nil {
		if !ddbhistory.ValidID(*named) {
			return "", badRequest("invalid_session_id", "session_id %q must be 1 to 128 letters, digits, '.', '_', ':' or '-', starting with a letter or digit", *named)
		}
		return *named, nil
	}
	if idemKey != "" {
		sum := sha256.Sum256([]byte(owner + "\x00" + idemKey))
		return "s-" + hex.EncodeToString(sum[:16]), nil
	}
	return "s-" + strings.ToLower(rand.Text()), nil
}

// body returns the request body, decoded from base64 when API Gateway
// encoded it, and refuses one over limit bytes.
func body(req *events.APIGatewayV2HTTPRequest, limit int) ([]byte, *Error) {
	raw := []byte(req.Body)
	if req.IsBase64Encoded {
		var err error
		if raw, err = base64.StdEncoding.DecodeString(req.Body); err != nil {
			return nil, badRequest("invalid_body", "the body is marked base64 but is not valid base64")
		}
	}
	if len(raw) > limit {
		return nil, &Error{Status: http.StatusRequestEntityTooLarge, Code: "message_too_large", Message: fmt.Sprintf("the body is %d bytes; at most %d", len(raw), limit)}
	}
	// JSON text is UTF-8. Decoding would replace invalid bytes with U+FFFD
	// and store a message the caller never sent.
	if !utf8.Valid(raw) {
		return nil, badRequest("invalid_body", "the body is not valid UTF-8; JSON text must be")
	}
	return raw, nil
}

// decodeJSON decodes one JSON value into v, strictly: unknown fields and
// trailing data are errors, and the message says where the problem is.
func decodeJSON(data []byte, v any, what string) *Error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	err := dec.Decode(v)
	if err == nil {
		if _, err2 := dec.Token(); err2 != io.EOF {
			return badRequest("invalid_json", "%s: unexpected data after the JSON value", what)
		}
		return nil
	}
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	var b64 base64.CorruptInputError
	switch {
	case errors.Is(err, io.EOF):
		return badRequest("invalid_json", "%s is empty; a JSON object is required", what)
	case errors.As(err, &syntax):
		return badRequest("invalid_json", "%s is not valid JSON: %v (at byte %d)", what, syntax, syntax.Offset)
	case errors.As(err, &typ):
		field := typ.Field
		if field == "" {
			field = "the value"
		}
		return badRequest("invalid_json", "%s: %s must be %s, not %s", what, field, typ.Type, typ.Value)
	case errors.As(err, &b64):
		return badRequest("invalid_base64", "%s: bytes must be standard base64: %v", what, b64)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return badRequest("invalid_json", "%s is truncated JSON", what)
	}
	// What is left is an unknown field or a JSON value of the wrong shape.
	return badRequest("invalid_json", "%s: %s", what, strings.TrimPrefix(err.Error(), "json: "))
}

// content turns a request's message or content blocks into turn input,
// checked as Bedrock would check it and against the size limit.
func content(message *string, blocks []json.RawMessage, limit int) ([]agent.ContentBlock, *Error) {
	var in []agent.ContentBlock
	switch {
	case message != nil && blocks != nil:
		return nil, badRequest("invalid_request", "send either message or content, not both")
	case message != nil:
		if strings.TrimSpace(*message) == "" {
			return nil, badRequest("invalid_request", "message is blank")
		}
		in = []agent.ContentBlock{agent.Text(*message)}
	case len(blocks) > 0:
		in = make([]agent.ContentBlock, len(blocks))
		for i, raw := range blocks {
			if err := decodeJSON(raw, &in[i], fmt.Sprintf("content[%d]", i)); err != nil {
				return nil, err
			}
		}
	default:
		return nil, badRequest("invalid_request", "message is required: send {\"message\": \"...\"} or content blocks")
	}
	size := 0
	for _, b := range in {
		size += len(b.Text)
		if b.Image != nil {
			size += len(b.Image.Source.Bytes)
		}
		if b.Document != nil {
			size += len(b.Document.Source.Bytes) + len(b.Document.Source.Text)
		}
	}
	if size > limit {
		return nil, &Error{Status: http.StatusRequestEntityTooLarge, Code: "message_too_large", Message: fmt.Sprintf("the message is %d bytes; at most %d", size, limit)}
	}
	if err := agent.ValidateInput(in); err != nil {
		return nil, errorFor(err)
	}
	return in, nil
}

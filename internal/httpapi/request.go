package httpapi

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/lambda-agent/lambda-agent/internal/turn"
	"io"
	"net/http"
	"reflect"
	"strings"
	"unicode/utf8"

	"github.com/lambda-agent/lambda-agent/internal/agent"
)

// anonymous owns the sessions of requests that name no caller, when the
// deployment allows them (RequireAuth off). It is a namespace of its own: no
// JWT subject may be it, and IAM owners all begin with iamPrefix.
const anonymous = turn.Anonymous

// iamPrefix begins the owners that are IAM principals. JWT subjects may not
// begin with it, so that no token can pass for a principal.
const iamPrefix = turn.IAMPrefix

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
func (h *Handler) owner(r *http.Request) (string, *Error) {
	unauthorized := func(format string, args ...any) *Error {
		return &Error{Code: "unauthorized", Message: fmt.Sprintf(format, args...)}
	}
	var owner string
	if a := authorizer(r.Context()); a != nil {
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
	case len(owner) > turn.MaxOwnerBytes:
		return "", unauthorized("the caller's identity is longer than %d bytes", turn.MaxOwnerBytes)
	case owner != "":
		return owner, nil
	case h.cfg.RequireAuth:
		return "", unauthorized("this API requires an authenticated caller (a JWT bearer token, or an IAM-signed request), and the request named none")
	}
	return anonymous, nil
}

// idempotencyKey returns the Idempotency-Key header, checked.
func idempotencyKey(r *http.Request) (string, *Error) {
	k := r.Header.Get("Idempotency-Key")
	if len(k) > maxIdempotencyKey {
		return "", badRequest("invalid_idempotency_key", "the Idempotency-Key header is %d characters; at most %d", len(k), maxIdempotencyKey)
	}
	for _, c := range k {
		if c < 0x21 || c > 0x7e {
			return "", badRequest("invalid_idempotency_key", "the Idempotency-Key header may hold only visible ASCII characters")
		}
	}
	return k, nil
}

// body reads the request body, and refuses one over limit bytes.
func body(r *http.Request, limit int) ([]byte, *Error) {
	if r.ContentLength > int64(limit) {
		return nil, tooLarge(r.ContentLength, limit)
	}
	raw, err := io.ReadAll(io.LimitReader(r.Body, int64(limit)+1))
	if err != nil {
		return nil, badRequest("invalid_body", "the body could not be read: %v", err)
	}
	if len(raw) > limit {
		// The length was not given, as with a function URL's base64 body:
		// count the rest, up to what an invocation can carry, so that the
		// caller learns the body's size rather than the limit's.
		rest, _ := io.Copy(io.Discard, io.LimitReader(r.Body, maxCounted))
		if rest == maxCounted {
			return nil, &Error{Code: "message_too_large", Message: fmt.Sprintf("the body is over %d bytes; at most %d", int64(len(raw))+rest, limit)}
		}
		return nil, tooLarge(int64(len(raw))+rest, limit)
	}
	// JSON text is UTF-8. Decoding would replace invalid bytes with U+FFFD
	// and store a message the caller never sent.
	if !utf8.Valid(raw) {
		return nil, badRequest("invalid_body", "the body is not valid UTF-8; JSON text must be")
	}
	return raw, nil
}

// maxCounted bounds how much of an oversized body of unknown length is read
// to tell its size: Lambda's request payload limit, 6 MB, and more.
const maxCounted = 8 << 20

func tooLarge(size int64, limit int) *Error {
	return &Error{Code: "message_too_large", Message: fmt.Sprintf("the body is %d bytes; at most %d", size, limit)}
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
		if typ.Field == "" {
			return badRequest("invalid_json", "%s must be %s, not %s", what, jsonType(typ.Type), jsonValue(typ.Value))
		}
		return badRequest("invalid_json", "%s: %s must be %s, not %s", what, typ.Field, jsonType(typ.Type), jsonValue(typ.Value))
	case errors.As(err, &b64):
		return badRequest("invalid_base64", "%s: bytes must be standard base64: %v", what, b64)
	case errors.Is(err, io.ErrUnexpectedEOF):
		return badRequest("invalid_json", "%s is truncated JSON", what)
	}
	// What is left is an unknown field or a JSON value of the wrong shape.
	return badRequest("invalid_json", "%s: %s", what, strings.TrimPrefix(err.Error(), "json: "))
}

// jsonType names the JSON type that a Go type decodes from, for messages
// that must not show Go's names.
func jsonType(t reflect.Type) string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t == reflect.TypeFor[json.RawMessage]():
		return "a JSON value"
	case t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Uint8:
		return "a base64 string"
	}
	switch t.Kind() {
	case reflect.String:
		return "a string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.Slice, reflect.Array:
		return "an array"
	case reflect.Map, reflect.Struct:
		return "an object"
	}
	return "another JSON type"
}

// jsonValue names the kind of JSON value that encoding/json reports.
func jsonValue(v string) string {
	switch v {
	case "array", "object":
		return "an " + v
	case "string", "number":
		return "a " + v
	case "bool":
		return "true or false"
	case "null":
		return "null"
	}
	if strings.HasPrefix(v, "number ") { // a number out of range, or not whole
		return "the number " + strings.TrimPrefix(v, "number ")
	}
	return v
}

// content turns a request's text (in the field named field) or content
// blocks into turn input, checked as Bedrock would check it and against the
// size limit.
func content(field string, message *string, blocks []json.RawMessage, limit int) ([]agent.ContentBlock, *Error) {
	var in []agent.ContentBlock
	switch {
	case message != nil && blocks != nil:
		return nil, badRequest("invalid_request", "send either %s or content, not both", field)
	case message != nil:
		if strings.TrimSpace(*message) == "" {
			return nil, badRequest("invalid_request", "%s is blank: it must hold some text", field)
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
		return nil, badRequest("invalid_request", "%s is required: send {\"%[1]s\": \"...\"} or content blocks", field)
	}
	return in, checkInput(in, limit)
}

// checkInput checks a turn's input as every way in does: at most limit
// bytes of text and media, and blocks the agent takes.
func checkInput(in []agent.ContentBlock, limit int) *Error {
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
		return &Error{Code: "message_too_large", Message: fmt.Sprintf("the message is %d bytes; at most %d", size, limit)}
	}
	if err := agent.ValidateInput(in); err != nil {
		return errorFor(err)
	}
	return nil
}

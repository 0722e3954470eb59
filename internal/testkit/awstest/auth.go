package awstest

import (
	"net/http"
	"strings"
)

// SignedRegion checks that r is signed with SigV4 for service, as AWS
// refuses anything else before looking at the request, and returns the
// region of the credential scope. It checks the header's shape and scope,
// not the signature, which needs the secret key. A refusal is a 403 with
// the code AWS gives, and its message under "message".
func SignedRegion(r *http.Request, service string) (region string, err *Error) {
	auth := r.Header.Get("Authorization")
	if auth == "" {
		return "", forbidden("MissingAuthenticationTokenException", "Missing Authentication Token")
	}
	incomplete := func(msg string) (string, *Error) {
		return "", forbidden("IncompleteSignatureException", msg)
	}
	params, ok := strings.CutPrefix(auth, "AWS4-HMAC-SHA256 ")
	if !ok {
		return incomplete("Authorization header is not an AWS4-HMAC-SHA256 signature.")
	}
	fields := map[string]string{}
	for part := range strings.SplitSeq(params, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		fields[k] = v
	}
	if fields["Credential"] == "" || fields["SignedHeaders"] == "" || fields["Signature"] == "" {
		return incomplete("Authorization header requires 'Credential', 'SignedHeaders' and 'Signature' parameters.")
	}
	if r.Header.Get("X-Amz-Date") == "" && r.Header.Get("Date") == "" {
		return incomplete("Authorization header requires existence of either a 'X-Amz-Date' or a 'Date' header.")
	}
	// Credential is AKID/yyyymmdd/region/service/aws4_request.
	scope := strings.Split(fields["Credential"], "/")
	if len(scope) != 5 || scope[4] != "aws4_request" || scope[2] == "" {
		return incomplete("Credential is not of the form AKID/date/region/service/aws4_request.")
	}
	if scope[3] != service {
		return "", forbidden("InvalidSignatureException", "Credential should be scoped to correct service: '"+service+"'. ")
	}
	return scope[2], nil
}

func forbidden(code, message string) *Error {
	return &Error{Status: http.StatusForbidden, Code: code, MessageKey: "message", Message: message}
}

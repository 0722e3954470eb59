package lambdahttp

import (
	"context"
	"net/http"
	"strings"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdaurl"
)

// WrapURL returns a handler that serves each function URL event with h,
// through aws-lambda-go's lambdaurl, which streams what h writes; it is for
// a function URL in RESPONSE_STREAM mode, as lambda.StartHandlerFunc takes
// it.
//
// A function URL gives the raw path and query as the client encoded them,
// and lambdaurl parses them as a URL: what does not parse, such as a bare %
// or a control character, would fail the invocation, which the caller sees
// as a 502, and a # or a ? in the path would cut it short. WrapURL
// percent-encodes those bytes first, so that h gets the path the client
// sent, in the same segments, and answers it.
func WrapURL(h http.Handler) func(context.Context, *events.LambdaFunctionURLRequest) (*events.LambdaFunctionURLStreamingResponse, error) {
	serve := lambdaurl.Wrap(h)
	return func(ctx context.Context, ev *events.LambdaFunctionURLRequest) (*events.LambdaFunctionURLStreamingResponse, error) {
		path, query := escapeRaw(ev.RawPath, "?#"), escapeRaw(ev.RawQueryString, "#")
		if path != ev.RawPath || query != ev.RawQueryString {
			escaped := *ev
			escaped.RawPath, escaped.RawQueryString = path, query
			ev = &escaped
		}
		return serve(ctx, ev)
	}
}

// escapeRaw percent-encodes the bytes of s that a URL cannot hold as they
// are: control characters, a % that begins no escape, and those of delims.
func escapeRaw(s, delims string) string {
	bad := func(i int) bool {
		c := s[i]
		return c < 0x20 || c == 0x7f || strings.IndexByte(delims, c) >= 0 ||
			c == '%' && (i+2 >= len(s) || !isHex(s[i+1]) || !isHex(s[i+2]))
	}
	var b strings.Builder
	for i := range len(s) {
		if !bad(i) {
			b.WriteByte(s[i])
			continue
		}
		const hex = "0123456789ABCDEF"
		b.WriteByte('%')
		b.WriteByte(hex[s[i]>>4])
		b.WriteByte(hex[s[i]&0xf])
	}
	return b.String()
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// URLRequestFromContext returns the function URL event a request made by
// WrapURL came from.
func URLRequestFromContext(ctx context.Context) (*events.LambdaFunctionURLRequest, bool) {
	return lambdaurl.RequestFromContext(ctx)
}

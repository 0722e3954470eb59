package lambdahttp_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambda"
	"github.com/lambda-agent/lambda-agent/internal/lambdahttp"
)

// invocationSize serves body through Wrap, as the chat function does, and
// returns the size of the invocation's response as aws-lambda-go's runtime
// sends it to Lambda.
func invocationSize(t testing.TB, body []byte) int {
	t.Helper()
	h := lambdahttp.Wrap(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	}))
	event, _ := json.Marshal(events.APIGatewayV2HTTPRequest{RouteKey: "GET /", RawPath: "/"})
	out, err := lambda.NewHandler(h).Invoke(context.Background(), event)
	if err != nil {
		t.Fatal(err)
	}
	return len(out)
}

// TestBodySizeIsWhatLambdaCarries: the size BodySize gives a body is what
// the body adds to the invocation's response, byte for byte, whatever it
// holds: what JSON escapes once and again, characters escaped as \u, and
// bytes that are not UTF-8, which go as base64.
func TestBodySizeIsWhatLambdaCarries(t *testing.T) {
	empty := invocationSize(t, nil)
	bodies := map[string]string{
		"plain":             `{"text":"hello"}`,
		"quotes":            strings.Repeat(`"`, 1000),
		"escaped quotes":    strings.Repeat(`\"`, 1000),
		"backslashes":       strings.Repeat(`\\`, 1000),
		"control":           "\x00\x01\x1f\b\f\n\r\t",
		"html":              "<a href='x'>&</a>",
		"line separators":   "\u2028\u2029",
		"json of html":      `"\u003c\u0026\u003e"`,
		"not UTF-8":         "\xff\xfe\xfd",
		"multibyte":         "héllo wörld — ✓ 😀",
		"a little of each":  `{"a":"\"\\<>&` + "\u2028\x01é\"}",
		"not UTF-8 at last": "fine until \xc3",
	}
	for name, body := range bodies {
		t.Run(name, func(t *testing.T) {
			if got, want := lambdahttp.BodySize([]byte(body)), invocationSize(t, []byte(body))-empty; got != want {
				t.Errorf("BodySize %d; the body adds %d bytes to the response", got, want)
			}
		})
	}
}

// TestMaxBodyFitsLambdasLimit: a body of MaxBodyBytes, as BodySize counts,
// leaves the whole response within MaxResponseBytes.
func TestMaxBodyFitsLambdasLimit(t *testing.T) {
	// Quotes take two bytes each in the event.
	body := []byte(strings.Repeat(`"`, lambdahttp.MaxBodyBytes/2))
	if n := lambdahttp.BodySize(body); n != lambdahttp.MaxBodyBytes {
		t.Fatalf("BodySize %d", n)
	}
	if n := invocationSize(t, body); n > lambdahttp.MaxResponseBytes {
		t.Errorf("the response is %d bytes; Lambda carries %d", n, lambdahttp.MaxResponseBytes)
	}
}

// FuzzBodySize: for any body, BodySize is what the body adds to the
// response, and it is additive over a split between characters.
func FuzzBodySize(f *testing.F) {
	for _, s := range []string{"", `"\`, "\x00\u2028<", "\xff", "é😀"} {
		f.Add([]byte(s), 1)
	}
	empty := invocationSize(f, nil)
	f.Fuzz(func(t *testing.T, body []byte, cut int) {
		if got, want := lambdahttp.BodySize(body), invocationSize(t, body)-empty; got != want {
			t.Fatalf("BodySize %d; the body adds %d", got, want)
		}
		if cut < 0 || cut > len(body) || !validUTF8(body) || !validUTF8(body[:cut]) || !validUTF8(body[cut:]) {
			return
		}
		if whole, parts := lambdahttp.BodySize(body), lambdahttp.BodySize(body[:cut])+lambdahttp.BodySize(body[cut:]); whole != parts {
			t.Errorf("BodySize %d whole, %d in two parts", whole, parts)
		}
	})
}

func validUTF8(b []byte) bool { return strings.ToValidUTF8(string(b), "\ufffd") == string(b) }

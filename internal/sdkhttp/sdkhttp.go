// Package sdkhttp is the HTTP client wrapper every AWS SDK client in
// lambda-agent goes through. It works around a race between smithy-go and
// net/http that breaks streamed responses.
//
// smithy-go closes a request's body as soon as the HTTP client returns the
// response, and its closed body's WriteTo returns io.EOF. net/http returns
// the response as soon as it arrives, while its write loop may still be
// checking the body for bytes past its Content-Length with io.Copy, which
// calls WriteTo and takes that io.EOF for a failed write. It then closes
// the connection, and a response still streaming on it, such as a
// ConverseStream answer, breaks off with "use of closed network
// connection". (aws/aws-sdk-go-v2#2737 reports the same race on buffered
// operations, which the SDK now retries; a stream half sent cannot be.)
//
// Wrap hands the transport the body without its WriteTo, so that the late
// check reads io.EOF, which is the end of a body and no error.
package sdkhttp

import (
	"io"
	"net/http"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
)

// Wrap returns c with the workaround; nil stands for the SDK's default
// client.
func Wrap(c aws.HTTPClient) aws.HTTPClient {
	switch c.(type) {
	case client:
		return c
	case nil:
		c = awshttp.NewBuildableClient()
	}
	return client{c}
}

type client struct{ next aws.HTTPClient }

func (c client) Do(r *http.Request) (*http.Response, error) {
	if r.Body != nil && r.Body != http.NoBody {
		shallow := *r
		shallow.Body = readCloser{r.Body}
		r = &shallow
	}
	return c.next.Do(r)
}

// readCloser has only Read and Close: no WriteTo.
type readCloser struct{ io.ReadCloser }

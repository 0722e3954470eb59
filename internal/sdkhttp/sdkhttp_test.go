package sdkhttp_test

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"

	"github.com/lambda-agent/lambda-agent/internal/sdkhttp"
)

// lateChecker is an HTTP client that does what net/http's write loop may
// do: answer at once, and only after the SDK has the response, read the
// request body past its end. It records what that read returned.
type lateChecker struct {
	late chan error
}

func (c *lateChecker) Do(r *http.Request) (*http.Response, error) {
	body := r.Body
	go func() {
		// The SDK closes the body when Do returns; by then this read runs.
		<-r.Context().Done()
		_, err := io.Copy(io.Discard, body)
		c.late <- err
	}()
	return &http.Response{
		StatusCode: http.StatusInternalServerError,
		Header:     http.Header{"X-Amzn-Errortype": {"InternalServerException"}},
		Body:       io.NopCloser(bytes.NewReader([]byte(`{"message":"stop here"}`))),
		Request:    r,
	}, nil
}

// lateRead makes one Converse call through the SDK with the client, and
// returns the error of a read of the request body after the call.
func lateRead(t *testing.T, wrap func(aws.HTTPClient) aws.HTTPClient) error {
	t.Helper()
	c := &lateChecker{late: make(chan error, 1)}
	client := bedrockruntime.New(bedrockruntime.Options{
		Region: "us-east-1",
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: "test", SecretAccessKey: "test"}, nil
		}),
		BaseEndpoint: aws.String("http://127.0.0.1:1"),
		HTTPClient:   wrap(c),
		Retryer:      aws.NopRetryer{},
	})
	ctx, cancel := context.WithCancel(t.Context())
	_, _ = client.Converse(ctx, &bedrockruntime.ConverseInput{
		ModelId:  aws.String("m"),
		Messages: []types.Message{{Role: types.ConversationRoleUser, Content: []types.ContentBlock{&types.ContentBlockMemberText{Value: "hi"}}}},
	})
	cancel() // the call returned: now the late read
	return <-c.late
}

func TestLateBodyReadIsNoError(t *testing.T) {
	// Without the wrapper the race is there: this is what closes a
	// streaming connection. If smithy-go fixes it, this part fails, and
	// the package can go.
	if err := lateRead(t, func(c aws.HTTPClient) aws.HTTPClient { return c }); err != io.EOF {
		t.Fatalf("a late read of the SDK's closed request body returned %v; the race this package works around is gone", err)
	}
	if err := lateRead(t, sdkhttp.Wrap); err != nil {
		t.Errorf("a late read through the wrapper returned %v, want the end of the body", err)
	}
}

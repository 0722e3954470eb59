// Command echo is the smallest useful Lambda function: it returns its event
// unchanged. It is the baseline that cold-start and memory measurements of
// the real functions are compared with, so it must stay minimal: no AWS
// clients, no logging, nothing at init but lambda.Start.
//
// The event comes back compacted (aws-lambda-go re-encodes the
// json.RawMessage), so insignificant whitespace is not preserved.
package main

import (
	"context"
	"encoding/json"

	"github.com/aws/aws-lambda-go/lambda"
)

func main() {
	lambda.Start(handle)
}

// handle returns the event as it came.
func handle(_ context.Context, event json.RawMessage) (json.RawMessage, error) {
	return event, nil
}

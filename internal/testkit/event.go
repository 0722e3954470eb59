package testkit

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"github.com/aws/aws-lambda-go/events"
)

// Event reads the sample HTTP API event name (payload format 2.0) from the
// module's events/ directory, the events `sam local invoke` sends. It
// finds the directory from a package's directory, where tests run, as from
// the module's root, where the bench runs.
func Event(name string) (events.APIGatewayV2HTTPRequest, error) {
	var ev events.APIGatewayV2HTTPRequest
	return ev, readEvent(name, &ev)
}

// ProxyEvent reads the sample REST API event name (a proxy event, payload
// format 1.0) from the module's events/ directory, as Event does.
func ProxyEvent(name string) (events.APIGatewayProxyRequest, error) {
	var ev events.APIGatewayProxyRequest
	return ev, readEvent(name, &ev)
}

// URLEvent reads the sample function URL event name, such as the stream
// function's, from the module's events/ directory, as Event does.
func URLEvent(name string) (events.LambdaFunctionURLRequest, error) {
	var ev events.LambdaFunctionURLRequest
	return ev, readEvent(name, &ev)
}

// StreamEvent reads the sample DynamoDB stream event name, such as the
// memory function's, from the module's events/ directory, as Event does.
func StreamEvent(name string) (events.DynamoDBEvent, error) {
	var ev events.DynamoDBEvent
	return ev, readEvent(name, &ev)
}

// EventJSON reads the sample event name from the module's events/
// directory as it is, for a handler that decodes events itself.
func EventJSON(name string) ([]byte, error) {
	dir, err := moduleRoot()
	if err != nil {
		return nil, err
	}
	return os.ReadFile(filepath.Join(dir, "events", name))
}

func readEvent(name string, v any) error {
	raw, err := EventJSON(name)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("events/%s: %w", name, err)
	}
	return nil
}

// moduleRoot is the nearest directory at or above the working directory
// that holds a go.mod.
var moduleRoot = sync.OnceValues(func() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("testkit: no go.mod at or above the working directory")
		}
		dir = parent
	}
})

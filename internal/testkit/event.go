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

// Event reads the sample event name from the module's events/ directory,
// the events `sam local invoke` sends. It finds the directory from a
// package's directory, where tests run, as from the module's root, where
// the bench runs.
func Event(name string) (events.APIGatewayV2HTTPRequest, error) {
	var ev events.APIGatewayV2HTTPRequest
	return ev, readEvent(name, &ev)
}

// URLEvent reads the sample function URL event name, such as the stream
// function's, from the module's events/ directory, as Event does.
func URLEvent(name string) (events.LambdaFunctionURLRequest, error) {
	var ev events.LambdaFunctionURLRequest
	return ev, readEvent(name, &ev)
}

func readEvent(name string, ev any) error {
	dir, err := moduleRoot()
	if err != nil {
		return err
	}
	raw, err := os.ReadFile(filepath.Join(dir, "events", name))
	if err != nil {
		return err
	}
	if err := json.Unmarshal(raw, ev); err != nil {
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

package agent

import (
	"testing"

	"github.com/lambda-agent/lambda-agent/internal/testkit/conversetest"
)

// NewWireModel returns a Model that calls the Converse stand-in s through the
// AWS SDK, as the Bedrock model does in production. The internal tests need
// one to check that Bedrock accepts what they send, but cannot build it:
// internal/agent/bedrock imports this package. The external tests set it
// (agent_test.go).
var NewWireModel func(s *conversetest.Server, modelID string) (Model, error)

// wireModel returns NewWireModel's model on s.
func wireModel(tb testing.TB, s *conversetest.Server, modelID string) Model {
	tb.Helper()
	if NewWireModel == nil {
		tb.Fatal("NewWireModel is not set: agent_test.go sets it")
	}
	m, err := NewWireModel(s, modelID)
	if err != nil {
		tb.Fatal(err)
	}
	return m
}

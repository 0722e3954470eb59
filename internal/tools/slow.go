//go:build faulttools

package tools

import (
	"context"
	"time"

	"github.com/lambda-agent/lambda-agent/internal/agent"
)

// This file exists only in binaries built with the faulttools tag, which the
// reliability suite uses to kill a function while a tool runs. Production
// builds have no such tool.

func init() { extra["slow"] = Slow }

// SlowInput is the slow tool's input.
type SlowInput struct {
	Milliseconds int `json:"milliseconds" jsonschema:"how long to take"`
}

// Slow returns a tool that takes the time it is asked to, honouring its
// context.
func Slow() agent.Tool {
	return must(agent.NewFuncTool("slow", "Take a while, for fault tests.",
		func(ctx context.Context, _ *agent.ToolCall, in SlowInput) (string, error) {
			select {
			case <-time.After(time.Duration(in.Milliseconds) * time.Millisecond):
				return "done", nil
			case <-ctx.Done():
				return "", ctx.Err()
			}
		}))
}

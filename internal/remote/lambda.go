package remote

import (
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/lambda/types"
	"github.com/lambda-agent/lambda-agent/internal/agent"
)

// Invoker is the part of *lambda.Client that Lambda tools use.
type Invoker interface {
	Invoke(ctx context.Context, in *lambda.InvokeInput, optFns ...func(*lambda.Options)) (*lambda.InvokeOutput, error)
}

// LambdaTools returns the tools of tools, each calling its function through
// client, with its input schema compiled. A tool whose schema cannot be
// used, past the budget of internal/schema/limits say, is left out, with a
// warning to logger (nil means slog.Default()) that names the tool, why,
// and the limit: the function starts, and serves its other tools.
func LambdaTools(client Invoker, tools []LambdaTool, logger *slog.Logger) []agent.Tool {
	var out []agent.Tool
	for _, t := range tools {
		schema, err := agent.CompileToolSchema(t.InputSchema)
		if err != nil {
			attrs := []any{"tool", t.Name, "function", t.Function, "reason", "its input schema cannot be used: " + err.Error()}
			if limit := limitOf(err); limit != "" {
				attrs = append(attrs, "limit", limit)
			}
			cmp.Or(logger, slog.Default()).Warn("Lambda tool left out", attrs...)
			continue
		}
		out = append(out, &lambdaTool{client: client, cfg: t, schema: schema})
	}
	return out
}

type lambdaTool struct {
	client Invoker
	cfg    LambdaTool
	schema *agent.ToolSchema // cfg.InputSchema, compiled
}

var _ agent.CompiledTool = (*lambdaTool)(nil)

func (t *lambdaTool) Spec() agent.ToolSpec {
	return agent.ToolSpec{Name: t.cfg.Name, Description: t.cfg.Description, InputSchema: t.cfg.InputSchema}
}

// CompiledSchema returns the input schema, compiled at init.
func (t *lambdaTool) CompiledSchema() *agent.ToolSchema { return t.schema }

// functionError is the payload of a function that failed.
type functionError struct {
	Message string `json:"errorMessage"`
	Type    string `json:"errorType"`
}

// ToolUseIDKey names the tool use id in what a remote tool receives beside
// its input: a Lambda function's client context (Custom) and an MCP call's
// _meta. A call the agent makes again, after a crash or a lost race, has
// the same id, so a service can make its effects happen once.
const ToolUseIDKey = "lambda-agent/tool_use_id"

// clientContext is the X-Amz-Client-Context of a call: base64 of JSON,
// which aws-lambda-go gives the function as lambdacontext's ClientContext.
func clientContext(toolUseID string) string {
	raw, _ := json.Marshal(map[string]map[string]string{"custom": {ToolUseIDKey: toolUseID}}) // strings encode
	return base64.StdEncoding.EncodeToString(raw)
}

// Run invokes the function, synchronously, with the tool's input as the
// event, and the tool use id in the client context. The function's JSON answer is the result: an object as JSON,
// anything else as text. A function error, and a call that fails, are
// errors, which the model receives as error results.
func (t *lambdaTool) Run(ctx context.Context, call *agent.ToolCall) ([]agent.ToolResultContent, error) {
	out, err := t.client.Invoke(ctx, &lambda.InvokeInput{
		FunctionName:   aws.String(t.cfg.Function),
		InvocationType: types.InvocationTypeRequestResponse,
		Payload:        call.Input,
		ClientContext:  aws.String(clientContext(call.ID)),
	})
	if err != nil {
		return nil, fmt.Errorf("calling the function %s: %w", t.cfg.Function, err)
	}
	if out.FunctionError != nil {
		var fe functionError
		if json.Unmarshal(out.Payload, &fe) != nil || fe.Message == "" {
			fe.Message = strings.TrimSpace(string(out.Payload))
		}
		if fe.Type != "" {
			return nil, fmt.Errorf("the function failed (%s): %s", fe.Type, fe.Message)
		}
		return nil, fmt.Errorf("the function failed: %s", fe.Message)
	}
	payload := json.RawMessage(out.Payload)
	switch {
	case len(strings.TrimSpace(string(payload))) == 0 || string(payload) == "null":
		return []agent.ToolResultContent{{Text: "The function returned nothing."}}, nil
	case !json.Valid(payload):
		return nil, errors.New("the function's answer is not JSON")
	}
	var s string
	if json.Unmarshal(payload, &s) == nil {
		return []agent.ToolResultContent{{Text: s}}, nil
	}
	if strings.HasPrefix(strings.TrimSpace(string(payload)), "{") {
		return []agent.ToolResultContent{{JSON: payload}}, nil
	}
	return []agent.ToolResultContent{{Text: string(payload)}}, nil
}

// Package bedrock is the agent's Model on Amazon Bedrock's Converse API.
//
// It has one reason to change: Bedrock's wire types and rules. It converts
// the agent's messages to and from bedrockruntime's types (convert.go, the
// only place the two meet), decodes ConverseStream's event stream
// (stream.go), maps the SDK's errors to *agent.ModelError with an
// agent.ErrorKind (classify.go), reads from a guardrail's trace whether it
// blocked the input or the answer (guardrail.go), and works around what the
// SDK cannot send, such as an object key that is empty.
//
// The package agent knows nothing of the SDK: it sees a Model that streams.
// Its tests, and this package's, reach a real SDK client through
// internal/testkit/conversetest, a strict stand-in that speaks Converse's wire
// protocol.
//
//	client := bedrockruntime.NewFromConfig(awsCfg)
//	model, err := bedrock.New(client, bedrock.Config{ModelID: "us.anthropic.claude-sonnet-4-v1:0"})
//	a, err := agent.New(agent.Config{Model: model})
package bedrock

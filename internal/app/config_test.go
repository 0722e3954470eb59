package app

import (
	"maps"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/lambda-agent/lambda-agent/internal/memory"
	"github.com/lambda-agent/lambda-agent/internal/telemetry"
	"github.com/lambda-agent/lambda-agent/internal/tools"
)

func env(vars map[string]string) func(string) string {
	return func(k string) string { return vars[k] }
}

func TestConfigFromEnvDefaults(t *testing.T) {
	got, err := ConfigFromEnv(env(map[string]string{"TABLE_NAME": "t", "MODEL_ID": "m"}))
	if err != nil {
		t.Fatal(err)
	}
	want := &Config{
		TableName: "t", ModelID: "m", Manager: "sliding", WindowSize: 40, SummaryRatio: 0.3,
		PreserveRecent: 10, MaxCycles: 20, Tools: tools.Names, SessionTTLDays: 30, MaxMessageBytes: 262144,
		MaxToolResultBytes: 65536, MaxToolResultMediaBytes: 3_750_000,
		InterruptTTL: 24 * time.Hour, TrimTurns: 3, PromptCache: true, GuardrailRedactedInput: "[User input redacted.]",
		FunctionName: "local", MetricsNamespace: "LambdaAgent", Tracing: telemetry.TracingConfig{ServiceName: "lambda-agent"},
		A2A: A2AConfig{Name: DefaultA2AName, Description: DefaultA2ADescription}, Memory: MemoryConfig{TTLDays: 365},
		AgentCore: AgentCoreConfig{Namespace: "/users/{actorId}"},
		Audit:     AuditConfig{TTLDays: DefaultAuditTTLDays},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("defaults (-want +got):\n%s", diff)
	}
}

func TestConfigFromEnvReadsEverything(t *testing.T) {
	got, err := ConfigFromEnv(env(map[string]string{
		"TABLE_NAME": "t", "MODEL_ID": "m", "SYSTEM_PROMPT": "be brief", "MAX_TOKENS": "1024",
		"TEMPERATURE": "0.2", "CONVERSATION_MANAGER": "summarizing", "WINDOW_SIZE": "60",
		"SUMMARY_RATIO": "0.5", "PRESERVE_RECENT_MESSAGES": "6", "SUMMARIZER_MODEL_ID": "small", "WINDOW_LOW_WATER": "24",
		"TOOL_RESULT_TRIM_TURNS": "2", "TOOL_RESULT_TRIM_BYTES": "4096", "PROMPT_CACHE": "off",
		"CONTEXT_WINDOW_TOKENS": "200000", "MAX_CYCLES": "8", "TOOLS": "calculator, recall, ask_user",
		"APPROVAL_TOOLS": "calculator", "INTERRUPT_TTL": "30m",
		"SESSION_TTL_DAYS": "0", "MAX_MESSAGE_BYTES": "65536", "GUARDRAIL_ID": "g1",
		"MAX_TOOL_RESULT_BYTES": "200000", "MAX_TOOL_RESULT_MEDIA_BYTES": "1000000",
		"GUARDRAIL_VERSION": "3", "GUARDRAIL_REDACTED_INPUT": "[Entfernt.]", "REQUIRE_AUTH": "true", "METRICS_NAMESPACE": "Team/Agents",
		"AWS_LAMBDA_FUNCTION_NAME": "chat-fn", "AWS_REGION": "eu-west-1", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://localhost:4318/",
		"OTEL_EXPORTER_OTLP_HEADERS": "x-api-key=a%20b,tenant=7", "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION": "gzip",
		"OTEL_EXPORTER_OTLP_TIMEOUT": "2500", "OTEL_RESOURCE_ATTRIBUTES": "deployment.environment.name=prod",
		"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true", "DIRECT_TOOLS": "recall,orders_refresh",
		"ALLOWED_ORIGINS": "https://chat.example.com,http://localhost:3000",
		"A2A_NAME":        "support", "A2A_DESCRIPTION": "Answers support questions.", "A2A_PUBLIC_URL": "https://agents.example.com/support/a2a",
		"MEMORY": "on", "MEMORY_IAM_OWNERS": "true", "MEMORY_MODEL_ID": "small", "MEMORY_TTL_DAYS": "0",
		"MEMORY_KINDS":        `[{"name":"fact","prompt":"Facts."},{"name":"style","prompt":"How to answer.","always":true}]`,
		"AGENTCORE_NAMESPACE": "/teams/support/{actorId}",
		"AUDIT":               "on", "AUDIT_TTL_DAYS": "7",
	}))
	if err != nil {
		t.Fatal(err)
	}
	temp := 0.2
	want := &Config{
		TableName: "t", ModelID: "m", SystemPrompt: "be brief", MaxTokens: 1024, Temperature: &temp,
		Manager: "summarizing", WindowSize: 60, WindowLowWater: 24, TrimTurns: 2, TrimBytes: 4096, SummaryRatio: 0.5, PreserveRecent: 6, SummarizerModelID: "small",
		ContextWindowTokens: 200000, MaxCycles: 8, Tools: []string{"calculator", "recall", "ask_user"}, SessionTTLDays: 0,
		ApprovalTools: []string{"calculator"}, InterruptTTL: 30 * time.Minute,
		MaxMessageBytes: 65536, MaxToolResultBytes: 200000, MaxToolResultMediaBytes: 1_000_000, GuardrailID: "g1", GuardrailVersion: "3", GuardrailRedactedInput: "[Entfernt.]", RequireAuth: true,
		FunctionName: "chat-fn", MetricsNamespace: "Team/Agents", DirectTools: []string{"recall", "orders_refresh"}, Region: "eu-west-1",
		AllowedOrigins: []string{"https://chat.example.com", "http://localhost:3000"},
		A2A:            A2AConfig{Name: "support", Description: "Answers support questions.", PublicURL: "https://agents.example.com/support/a2a"},
		Memory: MemoryConfig{Enabled: true, IAMOwners: true, ModelID: "small", TTLDays: 0,
			Kinds: []memory.Kind{{Name: "fact", Prompt: "Facts."}, {Name: "style", Prompt: "How to answer.", Always: true}}},
		AgentCore: AgentCoreConfig{Namespace: "/teams/support/{actorId}"},
		Audit:     AuditConfig{Enabled: true, TTLDays: 7},
		Tracing: telemetry.TracingConfig{
			Endpoint: "http://localhost:4318/v1/traces", Headers: map[string]string{"x-api-key": "a b", "tenant": "7"},
			Gzip: true, Timeout: 2500 * time.Millisecond, ServiceName: "chat-fn", CaptureContent: true,
			Resource: map[string]string{
				"deployment.environment.name": "prod", "cloud.provider": "aws", "cloud.platform": "aws_lambda",
				"cloud.region": "eu-west-1", "faas.name": "chat-fn",
			},
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	// APPROVAL_TOOLS names remote tools too: a Lambda tool, one with an
	// MCP server's prefix, and any name when a server has no prefix.
	remote, err := ConfigFromEnv(env(map[string]string{
		"TABLE_NAME": "t", "MODEL_ID": "m", "APPROVAL_TOOLS": "refund,orders_cancel,anything",
		"LAMBDA_TOOLS": `[{"name":"refund","function":"f","description":"d"}]`,
		"MCP_SERVERS":  `[{"name":"orders","url":"https://o.example.com/mcp"},{"name":"bare","url":"https://b.example.com/mcp","prefix":""}]`,
	}))
	if err != nil || len(remote.ApprovalTools) != 3 {
		t.Errorf("approvals of remote tools: %v, %v", remote, err)
	}
	none, err := ConfigFromEnv(env(map[string]string{"TABLE_NAME": "t", "MODEL_ID": "m", "TOOLS": "none"}))
	if err != nil || len(none.Tools) != 0 {
		t.Errorf("TOOLS=none: %v, %v", none.Tools, err)
	}
}

func TestConfigFromEnvReportsEveryProblem(t *testing.T) {
	_, err := ConfigFromEnv(env(map[string]string{
		"MAX_TOKENS": "-1", "TEMPERATURE": "1.5", "CONVERSATION_MANAGER": "fancy", "WINDOW_SIZE": "1",
		"SUMMARY_RATIO": "0.9", "MAX_CYCLES": "0", "TOOLS": "calculator,shell", "SESSION_TTL_DAYS": "1.5",
		"MAX_MESSAGE_BYTES": "lots", "GUARDRAIL_ID": "g",
		"MAX_TOOL_RESULT_BYTES": "100", "MAX_TOOL_RESULT_MEDIA_BYTES": "5000000", "REQUIRE_AUTH": "yes please",
		"CONTEXT_WINDOW_TOKENS": "12", "APPROVAL_TOOLS": "recall", "INTERRUPT_TTL": "forever", "WINDOW_LOW_WATER": "0",
		"TOOL_RESULT_TRIM_BYTES": "10", "PROMPT_CACHE": "maybe", "MODEL_PRICES": `{"input":3}`,
		"LAMBDA_TOOLS":                `[{"name":"calculator","function":"f","description":"d"}]`,
		"METRICS_NAMESPACE":           "AWS/Lambda",
		"OTEL_EXPORTER_OTLP_ENDPOINT": "localhost:4318", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc",
		"OTEL_EXPORTER_OTLP_HEADERS": "novalue", "OTEL_EXPORTER_OTLP_COMPRESSION": "zstd", "OTEL_EXPORTER_OTLP_TIMEOUT": "soon",
		"OTEL_TRACES_EXPORTER": "console", "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "sometimes",
		"DIRECT_TOOLS": "calculator,rm -rf", "GUARDRAIL_REDACTED_INPUT": " \n ",
		"ALLOWED_ORIGINS": "https://ok.example.com,https://chat.example.com/app",
		"A2A_NAME":        strings.Repeat("n", 65), "A2A_DESCRIPTION": " ", "A2A_PUBLIC_URL": "http://agents.example.com/a2a",
		"AGENTCORE_MEMORY_ID": "arn:aws:bedrock-agentcore:us-east-1:123456789012:memory/m-AbCdE01234", "AGENTCORE_NAMESPACE": "/users/{sessionId}",
	}))
	if err == nil {
		t.Fatal("ConfigFromEnv accepted a broken environment")
	}
	for _, want := range []string{
		"TABLE_NAME is required", "MODEL_ID is required", "MAX_TOKENS", "TEMPERATURE", "CONVERSATION_MANAGER",
		"WINDOW_SIZE", "SUMMARY_RATIO", "MAX_CYCLES", `"shell"`, "SESSION_TTL_DAYS", "MAX_MESSAGE_BYTES", "MAX_TOOL_RESULT_BYTES", "MAX_TOOL_RESULT_MEDIA_BYTES",
		"GUARDRAIL_ID and GUARDRAIL_VERSION", "REQUIRE_AUTH", "CONTEXT_WINDOW_TOKENS",
		`APPROVAL_TOOLS: "recall" is not an enabled tool`, "INTERRUPT_TTL", "WINDOW_LOW_WATER", "TOOL_RESULT_TRIM_BYTES", "PROMPT_CACHE",
		"MODEL_PRICES: input and output are required",
		`LAMBDA_TOOLS: "calculator" is the name of a built-in tool`,
		"METRICS_NAMESPACE", `OTLP endpoint "localhost:4318/v1/traces"`, "OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_HEADERS",
		"OTEL_EXPORTER_OTLP_COMPRESSION", "OTEL_EXPORTER_OTLP_TIMEOUT", "OTEL_TRACES_EXPORTER",
		"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", `DIRECT_TOOLS: "rm -rf" is not a tool name`,
		"GUARDRAIL_REDACTED_INPUT", `ALLOWED_ORIGINS: "https://chat.example.com/app" is not an origin`,
		"A2A_NAME", "A2A_DESCRIPTION", `A2A_PUBLIC_URL="http://agents.example.com/a2a"`,
		"AGENTCORE_MEMORY_ID: \"arn:aws:", "AGENTCORE_NAMESPACE: namespace \"/users/{sessionId}\" must have {actorId} once",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not mention %s:\n%v", want, err)
		}
	}
}

// TestConfigAgentCore: AGENTCORE_MEMORY_ID takes a memory id, not an ARN,
// and excludes MEMORY=on; AGENTCORE_NAMESPACE needs {actorId} once and no
// other placeholder.
func TestConfigAgentCore(t *testing.T) {
	base := map[string]string{"TABLE_NAME": "t", "MODEL_ID": "m"}
	with := func(vars map[string]string) (*Config, error) {
		all := maps.Clone(base)
		maps.Copy(all, vars)
		return ConfigFromEnv(env(all))
	}
	got, err := with(map[string]string{"AGENTCORE_MEMORY_ID": "support_memory-AbCdE01234"})
	if err != nil || got.AgentCore != (AgentCoreConfig{MemoryID: "support_memory-AbCdE01234", Namespace: "/users/{actorId}"}) {
		t.Errorf("AGENTCORE_MEMORY_ID alone: %+v, %v", got, err)
	}
	for _, bad := range []map[string]string{
		{"AGENTCORE_MEMORY_ID": "support_memory-AbCdE01234", "MEMORY": "on"},
		{"AGENTCORE_MEMORY_ID": "short-AbCdE0123"},
		{"AGENTCORE_NAMESPACE": "users/{actorId}"},
		{"AGENTCORE_NAMESPACE": "/users/{actorId}/{actorId}"},
		{"AGENTCORE_NAMESPACE": "/strategies/{memoryStrategyId}/actors/{actorId}"},
		{"AGENTCORE_NAMESPACE": "/users/{actorId}/" + strings.Repeat("n", 1000)},
	} {
		if _, err := with(bad); err == nil {
			t.Errorf("%v was accepted", bad)
		}
	}
}

// TestConfigAllowedOrigins: ALLOWED_ORIGINS takes origins as a browser
// sends them in Origin, and nothing that could never match one.
func TestConfigAllowedOrigins(t *testing.T) {
	for _, o := range []string{"https://chat.example.com", "http://localhost:3000", "https://a.example.com:8443"} {
		c, err := ConfigFromEnv(env(map[string]string{"TABLE_NAME": "t", "MODEL_ID": "m", "ALLOWED_ORIGINS": o}))
		if err != nil || len(c.AllowedOrigins) != 1 || c.AllowedOrigins[0] != o {
			t.Errorf("%q: %v, %v", o, c, err)
		}
	}
	for _, o := range []string{"*", "https://*.example.com", "chat.example.com", "https://chat.example.com/", "https://chat.example.com/app",
		"ftp://files.example.com", "https://", "https://chat.example.com?x=1", "https://user@chat.example.com", "null"} {
		if _, err := ConfigFromEnv(env(map[string]string{"TABLE_NAME": "t", "MODEL_ID": "m", "ALLOWED_ORIGINS": o})); err == nil || !strings.Contains(err.Error(), "ALLOWED_ORIGINS") {
			t.Errorf("%q accepted: %v", o, err)
		}
	}
}

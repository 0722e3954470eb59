package app

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/agentcore"
	"github.com/lambda-agent/lambda-agent/internal/httpapi"
	"github.com/lambda-agent/lambda-agent/internal/memory"
	"github.com/lambda-agent/lambda-agent/internal/pricing"
	"github.com/lambda-agent/lambda-agent/internal/remote"
	"github.com/lambda-agent/lambda-agent/internal/telemetry"
	"github.com/lambda-agent/lambda-agent/internal/tools"
)

// Config is the functions' configuration, read from the environment. Every
// field has a documented default except TableName and ModelID.
type Config struct {
	TableName string // TABLE_NAME, required
	ModelID   string // MODEL_ID, required
	// SystemPrompt is SYSTEM_PROMPT; or, for one that names an SSM
	// parameter as ssm:/a/name, that parameter's value, which
	// LoadSystemPrompt reads from SystemPromptParam.
	SystemPrompt      string
	SystemPromptParam string
	MaxTokens         int // MAX_TOKENS; 0 leaves the model's default
	// Temperature is TEMPERATURE in [0, 1]; nil leaves the model's default.
	Temperature *float64
	// Manager is CONVERSATION_MANAGER: sliding (default), summarizing or none.
	Manager string
	// WindowSize is WINDOW_SIZE, default 40: the sliding window's length, and
	// the length at which the summarizing manager summarizes.
	WindowSize int
	// WindowLowWater is WINDOW_LOW_WATER: the length the sliding window is
	// cut back to once it passes WINDOW_SIZE. 0, the default, is half of
	// WINDOW_SIZE; a value past WINDOW_SIZE is WINDOW_SIZE.
	WindowLowWater int
	// TrimTurns is TOOL_RESULT_TRIM_TURNS, default 3, and TrimBytes
	// TOOL_RESULT_TRIM_BYTES, default 0 (off): tool results larger than
	// TrimBytes, before the last TrimTurns turns, are trimmed in what the
	// model sees (agent.ResultTrim).
	TrimTurns, TrimBytes int
	// PromptCache is PROMPT_CACHE, on (the default) or off: prompt cache
	// points in the requests of the models that cache.
	PromptCache bool
	// Prices is MODEL_PRICES, the model's prices for the cost estimate;
	// nil means pricing's table.
	Prices              *pricing.Prices
	SummaryRatio        float64 // SUMMARY_RATIO, default 0.3, in [0.1, 0.8]
	PreserveRecent      int     // PRESERVE_RECENT_MESSAGES, default 10, at least 1
	SummarizerModelID   string  // SUMMARIZER_MODEL_ID; empty means MODEL_ID
	ContextWindowTokens int     // CONTEXT_WINDOW_TOKENS; 0 turns proactive reduction off
	MaxCycles           int     // MAX_CYCLES, default 20
	// Tools is TOOLS, a comma-separated list of built-ins; unset means
	// tools.Names, and "none" none.
	Tools []string
	// ApprovalTools is APPROVAL_TOOLS, a comma-separated list of enabled
	// tools whose every use waits for a person's approval.
	ApprovalTools []string
	// DirectTools is DIRECT_TOOLS, the tools a person may call directly
	// (POST /sessions/{id}/tools/{name}): a comma-separated list, or none.
	// nil, when unset, means the enabled built-in tools; remote tools only
	// when named.
	DirectTools []string
	// InterruptTTL is INTERRUPT_TTL, a duration such as 30m or 24h, default
	// 24h: how long interrupts wait for a response before they count as
	// denied.
	InterruptTTL time.Duration
	// MCPServers is MCP_SERVERS, a JSON list of the MCP servers whose tools
	// the agent may use.
	MCPServers []remote.MCPServer
	// LambdaTools is LAMBDA_TOOLS, a JSON list of the Lambda functions the
	// agent may call as tools.
	LambdaTools []remote.LambdaTool
	// A2AAgents is A2A_AGENTS, a JSON list of the remote agents, reached
	// over A2A, that the agent may call as tools (docs/a2a.md), or those
	// read from A2AAgentsPath.
	A2AAgents []remote.A2AAgent
	// A2AAgentsPath is the SSM parameter path that A2A_AGENTS names as
	// ssm:/a/path, under which each remote agent is a parameter:
	// LoadA2AAgents reads them into A2AAgents.
	A2AAgentsPath string
	// Agents is AGENTS, a JSON list of the sub-agents the main agent may
	// delegate tasks to (docs/subagents.md), or those read from AgentsPath.
	Agents []SubAgent
	// AgentsPath is the SSM parameter path that AGENTS names as
	// ssm:/a/path, under which each agent is a parameter: LoadAgents reads
	// them into Agents.
	AgentsPath string
	// AdditionalModels is ADDITIONAL_MODEL_ARNS, a comma-separated list of
	// the ARNs of the models the functions may call besides MODEL_ID and
	// SUMMARIZER_MODEL_ID: the template grants exactly these. A sub-agent's
	// model_id must be among them (Config.checkModel).
	AdditionalModels []ModelARN
	// Region is AWS_REGION, which Lambda sets: the Region whose ARNs in
	// AdditionalModels count for a model, with those of every Region.
	Region          string
	SessionTTLDays  int // SESSION_TTL_DAYS, default 30; 0 keeps sessions forever
	MaxMessageBytes int // MAX_MESSAGE_BYTES, default 262144, at most MaxMessageBytes
	// MaxToolResultBytes is MAX_TOOL_RESULT_BYTES, default
	// agent.DefaultMaxToolResultBytes: the text and JSON of one tool
	// result, past which it is cut (1 KiB to 1 MiB).
	MaxToolResultBytes int
	// MaxToolResultMediaBytes is MAX_TOOL_RESULT_MEDIA_BYTES, default
	// agent.DefaultMaxToolResultMediaBytes: the images and documents of
	// one tool result together (at most agent.MaxDocumentBytes).
	MaxToolResultMediaBytes int
	GuardrailID             string // GUARDRAIL_ID
	GuardrailVersion        string // GUARDRAIL_VERSION
	// GuardrailRedactedInput is GUARDRAIL_REDACTED_INPUT, default
	// agent.DefaultRedactedInput: the text a turn stores in place of a
	// user's message that the guardrail blocked.
	GuardrailRedactedInput string
	RequireAuth            bool // REQUIRE_AUTH, default false
	// AllowedOrigins is ALLOWED_ORIGINS, a comma-separated list of browser
	// origins such as https://chat.example.com, default none: the stream
	// function allows them by CORS in its answers to a REST API's events,
	// which API Gateway passes as they are (lambdahttp.StreamOptions).
	// HTTP APIs and function URLs answer CORS from their own settings.
	AllowedOrigins []string
	// FunctionName is AWS_LAMBDA_FUNCTION_NAME, which Lambda sets: the
	// metrics' FunctionName dimension. Empty, it is "local".
	FunctionName string
	// MetricsNamespace is METRICS_NAMESPACE, default
	// telemetry.DefaultNamespace: the CloudWatch namespace of the metrics.
	MetricsNamespace string
	// A2A is what the A2A agent card says of the agent: A2A_NAME,
	// A2A_DESCRIPTION and A2A_PUBLIC_URL (docs/a2a.md).
	A2A A2AConfig
	// Tracing is read from OpenTelemetry's standard variables (see
	// telemetry.TracingConfigFromEnv); unset, nothing is traced.
	Tracing telemetry.TracingConfig
	// Memory is the long-term memory's configuration (docs/memory.md).
	Memory MemoryConfig
	// AgentCore is AgentCore Memory's, the alternative to Memory
	// (docs/memory.md, "AgentCore Memory").
	AgentCore AgentCoreConfig
	// Audit is the audit record's configuration (AUDIT, AUDIT_TTL_DAYS).
	Audit AuditConfig
}

// AgentCoreConfig configures AgentCore Memory (internal/agentcore). The
// owners that have memory are the built-in memory's: MEMORY_IAM_OWNERS
// applies.
type AgentCoreConfig struct {
	// MemoryID is AGENTCORE_MEMORY_ID, the AgentCore Memory resource's id;
	// empty means off. It excludes MEMORY=on.
	MemoryID string
	// Namespace is AGENTCORE_NAMESPACE, where an owner's long-term records
	// are, with {actorId}; default agentcore.DefaultNamespace.
	Namespace string
}

// MemoryConfig configures long-term memory (internal/memory).
type MemoryConfig struct {
	// Enabled is MEMORY, on or off (the default).
	Enabled bool
	// IAMOwners is MEMORY_IAM_OWNERS, default false: memory for owners
	// that are IAM principals, which every caller signing as one shares.
	IAMOwners bool
	// ModelID is MEMORY_MODEL_ID, the model that extracts; empty means
	// MODEL_ID. Another must be among ADDITIONAL_MODEL_ARNS.
	ModelID string
	// Kinds is MEMORY_KINDS, a JSON list of {"name", "prompt", "always"};
	// nil means memory.DefaultKinds.
	Kinds []memory.Kind
	// TTLDays is MEMORY_TTL_DAYS, default 365: how long a record is kept
	// after it was last learned; 0 keeps records forever.
	TTLDays int
}

// DefaultMemoryTTLDays is MEMORY_TTL_DAYS's default.
const DefaultMemoryTTLDays = 365

// A2AConfig is what the A2A agent card says of the agent.
type A2AConfig struct {
	// Name is A2A_NAME, default "lambda-agent", at most 64 bytes.
	Name string
	// Description is A2A_DESCRIPTION, at most 512 bytes, with a default.
	Description string
	// PublicURL is A2A_PUBLIC_URL: the URL of POST /a2a that the card
	// names, such as a custom domain's; unset, it is where the request
	// for the card came.
	PublicURL string
}

// Bounds and defaults of A2AConfig.
const (
	DefaultA2AName        = "lambda-agent"
	DefaultA2ADescription = "A conversational agent on AWS Lambda and Amazon Bedrock, which keeps each context's conversation."
	maxA2AName            = 64
	maxA2ADescription     = 512
)

// validNamespace says whether ns may be METRICS_NAMESPACE: 1 to 255 of
// CloudWatch's characters, and not one of the AWS/ namespaces, which are
// AWS's own. (A loop, not a regexp: a regexp compiled at init would cost
// every cold start.)
func validNamespace(ns string) bool {
	if len(ns) == 0 || len(ns) > 255 || strings.HasPrefix(ns, "AWS/") {
		return false
	}
	for _, r := range ns {
		if !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9' || strings.ContainsRune("._#:/-", r)) {
			return false
		}
	}
	return true
}

// managers are the conversation managers, as CONVERSATION_MANAGER and a
// sub-agent's conversation_manager spell them.
var managers = []string{"sliding", "summarizing", "none"}

// Bounds on WINDOW_SIZE, and a sub-agent's window_size.
const (
	MinWindowSize = 2
	MaxWindowSize = 10_000
)

// MaxRedactedInput is the longest GUARDRAIL_REDACTED_INPUT, in bytes: a
// note, not a message.
const MaxRedactedInput = 200

// DefaultTrimTurns is TOOL_RESULT_TRIM_TURNS's default.
const DefaultTrimTurns = 3

// DefaultSessionTTLDays is SESSION_TTL_DAYS's default.
const DefaultSessionTTLDays = 30

// MaxMessageBytes is the largest MAX_MESSAGE_BYTES. A turn's request and
// response pass through Lambda's 6 MB limit as base64 and JSON: a message of
// 2 MiB leaves room for the rest of the turn in both.
const MaxMessageBytes = 2 << 20

// ConfigFromEnv reads the configuration with getenv, usually os.Getenv. An empty
// variable is an unset one. It reports every invalid variable at once, so a
// misconfigured function fails at init with one clear message.
func ConfigFromEnv(getenv func(string) string) (*Config, error) {
	p := &parser{getenv: getenv}
	var err error
	c := &Config{
		TableName:           p.required("TABLE_NAME"),
		ModelID:             p.required("MODEL_ID"),
		SystemPrompt:        p.systemPrompt("SYSTEM_PROMPT"),
		MaxTokens:           p.integer("MAX_TOKENS", 0, 1, 1<<20),
		Temperature:         p.fraction("TEMPERATURE", 0, 1),
		Manager:             p.choice("CONVERSATION_MANAGER", "sliding", managers...),
		WindowSize:          p.integer("WINDOW_SIZE", agent.DefaultWindowSize, MinWindowSize, MaxWindowSize),
		PreserveRecent:      p.integer("PRESERVE_RECENT_MESSAGES", agent.DefaultPreserveRecent, 1, 10_000),
		SummarizerModelID:   getenv("SUMMARIZER_MODEL_ID"),
		ContextWindowTokens: p.integer("CONTEXT_WINDOW_TOKENS", 0, 1000, 100_000_000),
		MaxCycles:           p.integer("MAX_CYCLES", agent.DefaultMaxCycles, 1, 1000),
		SessionTTLDays:      p.integer("SESSION_TTL_DAYS", DefaultSessionTTLDays, 0, 36_500),
		MaxMessageBytes:     p.integer("MAX_MESSAGE_BYTES", httpapi.DefaultMaxMessageBytes, 1, MaxMessageBytes),
		MaxToolResultBytes:  p.integer("MAX_TOOL_RESULT_BYTES", agent.DefaultMaxToolResultBytes, 1<<10, 1<<20),
		GuardrailID:         getenv("GUARDRAIL_ID"),
		GuardrailVersion:    getenv("GUARDRAIL_VERSION"),
		RequireAuth:         p.boolean("REQUIRE_AUTH"),
	}
	c.WindowLowWater = p.integer("WINDOW_LOW_WATER", 0, 1, 10_000)
	c.TrimTurns = p.integer("TOOL_RESULT_TRIM_TURNS", DefaultTrimTurns, 1, 10_000)
	c.PromptCache = p.choice("PROMPT_CACHE", "on", "on", "off") == "on"
	if v := getenv("MODEL_PRICES"); v != "" {
		if prices, err := pricing.Parse(v); err != nil {
			p.fail("MODEL_PRICES: %v", err)
		} else {
			c.Prices = &prices
		}
	}
	c.TrimBytes = p.integer("TOOL_RESULT_TRIM_BYTES", 0, 64, 1<<30)
	c.MaxToolResultMediaBytes = p.integer("MAX_TOOL_RESULT_MEDIA_BYTES", agent.DefaultMaxToolResultMediaBytes, 1, agent.MaxDocumentBytes)
	c.SummaryRatio = agent.DefaultSummaryRatio
	if r := p.fraction("SUMMARY_RATIO", 0.1, 0.8); r != nil {
		c.SummaryRatio = *r
	}
	c.Tools = p.tools("TOOLS")
	c.MCPServers = jsonList(p, "MCP_SERVERS", remote.ParseMCPServers)
	c.LambdaTools = jsonList(p, "LAMBDA_TOOLS", remote.ParseLambdaTools)
	for _, t := range c.LambdaTools {
		if slices.Contains(c.Tools, t.Name) {
			p.fail("LAMBDA_TOOLS: %q is the name of a built-in tool that TOOLS enables; name the function's tool otherwise", t.Name)
		}
	}
	if v := strings.TrimSpace(getenv("A2A_AGENTS")); strings.HasPrefix(v, agentsPathPrefix) {
		if c.A2AAgentsPath, err = agentsPath(v); err != nil {
			p.fail("A2A_AGENTS: %v", err)
		}
	} else {
		c.A2AAgents = jsonList(p, "A2A_AGENTS", remote.ParseA2AAgents)
	}
	c.ApprovalTools = p.approvalTools("APPROVAL_TOOLS", c)
	c.DirectTools = p.toolNames("DIRECT_TOOLS")
	c.Region = getenv("AWS_REGION")
	if v := getenv("ADDITIONAL_MODEL_ARNS"); v != "" {
		if c.AdditionalModels, err = parseModelARNs(v); err != nil {
			p.fail("ADDITIONAL_MODEL_ARNS: %v", err)
		}
	}
	if v := strings.TrimSpace(getenv("AGENTS")); strings.HasPrefix(v, agentsPathPrefix) {
		// LoadAgents reads and checks them.
		if c.AgentsPath, err = agentsPath(v); err != nil {
			p.fail("AGENTS: %v", err)
		}
	} else {
		before := len(p.errs)
		c.Agents = jsonList(p, "AGENTS", func(v string) ([]SubAgent, error) { return parseAgents(v, c) })
		if len(p.errs) == before { // an AGENTS that failed has no agents to check the entries against
			p.errs = append(p.errs, checkAudiences(c)...)
		}
	}
	c.InterruptTTL = p.duration("INTERRUPT_TTL", agent.DefaultInterruptTTL, time.Second, 365*24*time.Hour)
	if (c.GuardrailID == "") != (c.GuardrailVersion == "") {
		p.fail("GUARDRAIL_ID and GUARDRAIL_VERSION must be set together")
	}
	c.AllowedOrigins = p.origins("ALLOWED_ORIGINS")
	c.GuardrailRedactedInput = p.text("GUARDRAIL_REDACTED_INPUT", agent.DefaultRedactedInput, MaxRedactedInput)
	c.FunctionName = cmp.Or(getenv("AWS_LAMBDA_FUNCTION_NAME"), "local")
	c.MetricsNamespace = cmp.Or(getenv("METRICS_NAMESPACE"), telemetry.DefaultNamespace)
	if !validNamespace(c.MetricsNamespace) {
		p.fail("METRICS_NAMESPACE=%q: want 1 to 255 letters, digits and ._#:/- characters, not beginning with AWS/", c.MetricsNamespace)
	}
	c.SystemPromptParam = p.param
	c.A2A = A2AConfig{
		Name:        p.text("A2A_NAME", DefaultA2AName, maxA2AName),
		Description: p.text("A2A_DESCRIPTION", DefaultA2ADescription, maxA2ADescription),
		PublicURL:   p.absoluteURL("A2A_PUBLIC_URL"),
	}
	c.Audit = auditConfig(p)
	c.Memory = MemoryConfig{
		Enabled:   p.choice("MEMORY", "off", "on", "off") == "on",
		IAMOwners: p.boolean("MEMORY_IAM_OWNERS"),
		ModelID:   getenv("MEMORY_MODEL_ID"),
		TTLDays:   p.integer("MEMORY_TTL_DAYS", DefaultMemoryTTLDays, 0, 36_500),
	}
	if id := c.Memory.ModelID; id != "" {
		if err := c.checkModel(id); err != nil {
			p.fail("MEMORY_MODEL_ID: %v", err)
		}
	}
	if v := getenv("MEMORY_KINDS"); v != "" {
		if err := json.Unmarshal([]byte(v), &c.Memory.Kinds); err != nil {
			p.fail("MEMORY_KINDS: not a JSON list of {\"name\", \"prompt\", \"always\"}: %v", err)
		} else if err := memory.CheckKinds(c.Memory.Kinds); err != nil {
			p.fail("MEMORY_KINDS: %v", err)
		}
	}
	c.AgentCore = AgentCoreConfig{
		MemoryID:  getenv("AGENTCORE_MEMORY_ID"),
		Namespace: cmp.Or(getenv("AGENTCORE_NAMESPACE"), agentcore.DefaultNamespace),
	}
	if id := c.AgentCore.MemoryID; id != "" {
		if err := agentcore.CheckMemoryID(id); err != nil {
			p.fail("AGENTCORE_MEMORY_ID: %v", err)
		}
		if c.Memory.Enabled {
			p.fail("AGENTCORE_MEMORY_ID is set and MEMORY=on: choose one long-term memory, AgentCore's or the built-in one")
		}
	}
	if err := agentcore.CheckNamespace(c.AgentCore.Namespace); err != nil {
		p.fail("AGENTCORE_NAMESPACE: %v", err)
	}
	tracing, err := telemetry.TracingConfigFromEnv(getenv)
	if err != nil {
		p.errs = append(p.errs, err)
	}
	c.Tracing = tracing
	if err := errors.Join(p.errs...); err != nil {
		return nil, fmt.Errorf("configuration: %w", err)
	}
	return c, nil
}

// parser reads variables and collects what is wrong with them.
type parser struct {
	getenv func(string) string
	errs   []error
	// param is the SSM parameter that SYSTEM_PROMPT names, if any.
	param string
}

func (p *parser) fail(format string, args ...any) {
	p.errs = append(p.errs, fmt.Errorf(format, args...))
}

func (p *parser) required(name string) string {
	v := p.getenv(name)
	if v == "" {
		p.fail("%s is required", name)
	}
	return v
}

// text reads a text that is stored or sent to the model as it is: not
// blank, as Bedrock wants text, and at most max bytes.
func (p *parser) text(name, def string, max int) string {
	v := p.getenv(name)
	switch {
	case v == "":
		return def
	case strings.TrimSpace(v) == "" || len(v) > max:
		p.fail("%s: want a text of 1 to %d bytes that is not blank", name, max)
		return def
	}
	return v
}

// systemPrompt reads SYSTEM_PROMPT: the prompt itself, or, for ssm:/a/name,
// nothing yet, and the parameter's name in SystemPromptParam.
func (p *parser) systemPrompt(name string) string {
	v := p.getenv(name)
	if !strings.HasPrefix(v, agentsPathPrefix) {
		return v
	}
	param, err := agentsPath(v)
	if err != nil || strings.HasSuffix(param, "/") {
		p.fail("%s: %q is not an SSM parameter name: want ssm:/a/name, of letters, digits and _ . -", name, v)
		return ""
	}
	p.param = param
	return ""
}

// absoluteURL reads an https URL, or an http one to a loopback host, as a
// local run's; "" when unset.
func (p *parser) absoluteURL(name string) string {
	v := p.getenv(name)
	if v == "" {
		return ""
	}
	u, err := url.Parse(v)
	local := u != nil && u.Scheme == "http" && (u.Hostname() == "localhost" || net.ParseIP(u.Hostname()).IsLoopback())
	if err != nil || u.Host == "" || u.User != nil || (u.Scheme != "https" && !local) || len(v) > 2048 {
		p.fail("%s=%q: want an absolute https URL (http only to localhost)", name, v)
		return ""
	}
	return v
}

func (p *parser) integer(name string, def, lo, hi int) int {
	v := p.getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil || n < lo || n > hi {
		p.fail("%s=%q: want a whole number from %d to %d", name, v, lo, hi)
		return def
	}
	return n
}

func (p *parser) fraction(name string, lo, hi float64) *float64 {
	v := p.getenv(name)
	if v == "" {
		return nil
	}
	f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
	if err != nil || f < lo || f > hi {
		p.fail("%s=%q: want a number from %v to %v", name, v, lo, hi)
		return nil
	}
	return &f
}

func (p *parser) choice(name, def string, choices ...string) string {
	v := p.getenv(name)
	if v == "" {
		return def
	}
	for _, c := range choices {
		if v == c {
			return v
		}
	}
	p.fail("%s=%q: want one of %s", name, v, strings.Join(choices, ", "))
	return def
}

func (p *parser) boolean(name string) bool {
	v := p.getenv(name)
	if v == "" {
		return false
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		p.fail("%s=%q: want true or false", name, v)
	}
	return b
}

func (p *parser) duration(name string, def, lo, hi time.Duration) time.Duration {
	v := p.getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(strings.TrimSpace(v))
	if err != nil || d < lo || d > hi {
		p.fail("%s=%q: want a duration from %s to %s, such as 30m or 24h", name, v, lo, hi)
		return def
	}
	return d
}

// origins reads a comma-separated list of origins, each a scheme (http or
// https), a host and perhaps a port, as a browser sends it in Origin: a
// path, a wildcard or a slash at the end would never match one.
func (p *parser) origins(name string) []string {
	var out []string
	for _, o := range list(p.getenv(name)) {
		u, err := url.Parse(o)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Scheme+"://"+u.Host != o || strings.Contains(o, "*") {
			p.fail("%s: %q is not an origin; want a scheme, a host and perhaps a port, such as https://chat.example.com", name, o)
			continue
		}
		out = append(out, o)
	}
	return out
}

// list reads a comma-separated list.
func list(v string) []string {
	var names []string
	for _, n := range strings.Split(v, ",") {
		if n = strings.TrimSpace(n); n != "" {
			names = append(names, n)
		}
	}
	return names
}

// approvalTools reads a list of tools that need approval, which must be
// among the enabled ones of c: a name that is not would guard nothing. An
// MCP server's tools are known only once listed, so a name with a server's
// prefix is taken on trust.
func (p *parser) approvalTools(name string, c *Config) []string {
	enabled := slices.Clone(c.Tools)
	for _, t := range c.LambdaTools {
		enabled = append(enabled, t.Name)
	}
	for _, a := range c.A2AAgents {
		enabled = append(enabled, a.Name)
	}
	names := list(p.getenv(name))
	for _, n := range names {
		if !slices.Contains(enabled, n) && !slices.ContainsFunc(c.MCPServers, func(s remote.MCPServer) bool {
			return strings.HasPrefix(n, s.ToolPrefix()) // a server without a prefix may have any name
		}) {
			p.fail("%s: %q is not an enabled tool, nor has an MCP server's prefix; the enabled tools are %s", name, n, strings.Join(enabled, ", "))
		}
	}
	return names
}

// toolNames reads a comma-separated list of tool names, or "none"; nil
// when unset. A name need not be enabled: a tool that is not cannot be
// called, and the list stays valid whatever TOOLS says.
func (p *parser) toolNames(name string) []string {
	v := strings.TrimSpace(p.getenv(name))
	switch v {
	case "":
		return nil
	case "none":
		return []string{}
	}
	names := list(v)
	for _, n := range names {
		if !agent.ValidToolName(n) {
			p.fail("%s: %q is not a tool name: 1 to 64 letters, digits, _ or -", name, n)
		}
	}
	return names
}

// jsonList reads a variable that holds a JSON list, with parse.
func jsonList[T any](p *parser, name string, parse func(string) ([]T, error)) []T {
	v := p.getenv(name)
	if strings.TrimSpace(v) == "" {
		return nil
	}
	out, err := parse(v)
	if err != nil {
		p.fail("%s: %v", name, err)
	}
	return out
}

func (p *parser) tools(name string) []string {
	v := p.getenv(name)
	if v == "" {
		return tools.Names
	}
	if v == "none" {
		return nil
	}
	names := list(v)
	if _, err := tools.ByName(names); err != nil {
		p.fail("%s=%q: %v", name, v, err)
	}
	return names
}

package app

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/bedrockagentcore"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	"github.com/lambda-agent/lambda-agent/internal/a2a"
	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/agent/bedrock"
	"github.com/lambda-agent/lambda-agent/internal/agentcore"
	"github.com/lambda-agent/lambda-agent/internal/ddbhistory"
	"github.com/lambda-agent/lambda-agent/internal/httpapi"
	"github.com/lambda-agent/lambda-agent/internal/memory"
	"github.com/lambda-agent/lambda-agent/internal/pricing"
	"github.com/lambda-agent/lambda-agent/internal/remote"
	"github.com/lambda-agent/lambda-agent/internal/sdkhttp"
	"github.com/lambda-agent/lambda-agent/internal/telemetry"
	"github.com/lambda-agent/lambda-agent/internal/tools"
	"github.com/lambda-agent/lambda-agent/internal/turn"
)

// Options are what a function chooses beyond its configuration.
type Options struct {
	// Routes are the routes the handler serves; see httpapi.Routes.
	Routes httpapi.Routes
	// CompileSchema compiles structured requests' schemas: schema.Compile
	// for a handler that serves them, nil for one that does not, which then
	// goes without the validator's start-up cost.
	CompileSchema SchemaCompiler
	// Logger gets the handler's line per request, and a line per failed
	// tool run; nil means slog.Default().
	Logger *slog.Logger
	// Retry is the model calls' retry policy; the zero value is the agent's
	// default. Tests shorten its waits.
	Retry agent.RetryPolicy
	// Remote reaches the remote tools' services. A client that the
	// configuration needs is required.
	Remote Remote
	// Metrics gets each request's metrics, as lines of CloudWatch's
	// Embedded Metric Format: stdout, on Lambda. nil records none.
	Metrics io.Writer
	// Summary gets a line a person reads for each turn (see
	// telemetry.Summary): the local run's. nil writes none.
	Summary io.Writer
	// MemoryForAnonymous gives long-term memory to the owner of
	// unauthenticated sessions: the local run's one user, one person.
	// Deployed, anonymous never has memory.
	MemoryForAnonymous bool
	// AgentCore reaches AgentCore Memory: required when
	// AGENTCORE_MEMORY_ID is set (FromEnv builds it).
	AgentCore agentcore.API
}

// Remote is how the remote tools are reached.
type Remote struct {
	// Lambda invokes LAMBDA_TOOLS' functions.
	Lambda remote.Invoker
	// SSM reads the secrets of MCP_SERVERS' headers.
	SSM remote.ParameterGetter
	// HTTP makes MCP requests; nil means an http.Client with the
	// defaults of remote.MCP.
	HTTP *http.Client
	// Credentials sign the requests to A2A_AGENTS' agents whose auth is
	// aws_iam: the function's role's.
	Credentials aws.CredentialsProvider
}

// App is what New built: the handler, and the parts it is made of, which
// tests reach for rather than build the wiring again.
type App struct {
	Config *Config
	Agent  *agent.Agent
	Store  *ddbhistory.Store
	// Memory is the built-in long-term memory; nil when it is off.
	Memory *memory.Store
	// AgentCore is AgentCore Memory; nil when it is off.
	AgentCore *agentcore.Memory
	Turns     *turn.Service
	// Handler serves the routes: the API's handler, whose requests
	// Tracing traces.
	Handler http.Handler
	// Tracing is the functions' tracing; Shutdown sends what it holds.
	Tracing *telemetry.Tracing
}

// New builds the application from cfg, calling Bedrock and DynamoDB
// through the given clients.
func New(cfg *Config, converse bedrock.ConverseAPI, ddb ddbhistory.DynamoDBAPI, opts Options) (*App, error) {
	opts.Logger = slog.New(telemetry.WithTraceID(cmp.Or(opts.Logger, slog.Default()).Handler()))
	tracing := telemetry.NewTracing(cfg.Tracing, opts.Logger)
	mem, err := memoryStore(cfg, ddb, opts)
	if err != nil {
		return nil, err
	}
	ac, err := agentCoreMemory(cfg, ddb, opts)
	if err != nil {
		return nil, err
	}
	a, err := newAgent(cfg, converse, opts, tracing, mem, ac)
	if err != nil {
		return nil, err
	}
	store, err := ddbhistory.New(ddb, StoreConfig(cfg))
	if err != nil {
		return nil, err
	}
	var turnOpts []turn.Option
	prices, priced := pricesOf(cfg)
	if priced {
		turnOpts = append(turnOpts, turn.WithPrices(prices))
	}
	agentModels, agentPrices := subAgentModels(cfg)
	turnOpts = append(turnOpts, turn.WithAgentPrices(agentPrices))
	turnOpts = append(turnOpts, turn.WithMaxStateBytes(a.MaxStateBytes()))
	if mem != nil {
		turnOpts = append(turnOpts, turn.WithProviders(&memory.Provider{Store: mem}))
	}
	if ac != nil {
		turnOpts = append(turnOpts, turn.WithProviders(ac))
	}
	turnOpts = append(turnOpts, auditOptions(cfg, store, opts)...)
	turns, err := turn.New(traceStore(tracing, store, cfg.TableName), a, turnOpts...)
	if err != nil {
		return nil, err
	}
	metrics := &telemetry.Metrics{Namespace: cfg.MetricsNamespace, Function: cfg.FunctionName, Model: cfg.ModelID, Out: opts.Metrics,
		AgentModels: agentModels, Prices: pricing.Table{Agents: agentPrices}}
	summary := &telemetry.Summary{Out: opts.Summary, Prices: pricing.Table{Agents: agentPrices}}
	if priced {
		metrics.Prices.Main, summary.Prices.Main = &prices, &prices
	}
	var routesMemory httpapi.Memory // no nil pointer in it
	switch {
	case mem != nil:
		routesMemory = mem
	case ac != nil:
		routesMemory = ac
	}
	h, err := httpapi.New(httpapi.Config{
		Memory:          routesMemory,
		Service:         turns,
		Routes:          opts.Routes,
		CompileSchema:   opts.CompileSchema,
		RequireAuth:     cfg.RequireAuth,
		MaxMessageBytes: cfg.MaxMessageBytes,
		ModelID:         cfg.ModelID,
		Card:            cardOf(cfg),
		Logger:          opts.Logger,
		Record: func(ctx context.Context, r telemetry.Request) {
			metrics.Record(ctx, r)
			tracing.Record(ctx, r)
			summary.Record(r)
		},
	})
	if err != nil {
		return nil, err
	}
	return &App{Config: cfg, Agent: a, Store: store, Memory: mem, AgentCore: ac, Turns: turns, Handler: tracing.Handler(h), Tracing: tracing}, nil
}

// memoryStore is the long-term memory cfg configures, or nil when it is
// off.
func memoryStore(cfg *Config, ddb ddbhistory.DynamoDBAPI, opts Options) (*memory.Store, error) {
	if !cfg.Memory.Enabled {
		return nil, nil
	}
	ttl := time.Duration(cfg.Memory.TTLDays) * 24 * time.Hour
	if cfg.Memory.TTLDays == 0 {
		ttl = -1 // kept forever
	}
	return memory.New(ddb, memory.Config{
		Table:             cfg.TableName,
		IAMOwners:         cfg.Memory.IAMOwners,
		AnonymousIsPerson: opts.MemoryForAnonymous,
		TTL:               ttl,
	})
}

// agentCoreMemory is the AgentCore Memory cfg configures, or nil when it
// is off.
func agentCoreMemory(cfg *Config, ddb ddbhistory.DynamoDBAPI, opts Options) (*agentcore.Memory, error) {
	if cfg.AgentCore.MemoryID == "" {
		return nil, nil
	}
	if opts.AgentCore == nil {
		return nil, errors.New("AGENTCORE_MEMORY_ID is set, and no AgentCore client was given")
	}
	on := *cfg // its owners are those the built-in memory would have
	on.Memory.Enabled = true
	owners, err := memoryStore(&on, ddb, opts)
	if err != nil {
		return nil, err
	}
	ac, err := agentcore.New(opts.AgentCore, owners, agentcore.Config{MemoryID: cfg.AgentCore.MemoryID, Namespace: cfg.AgentCore.Namespace})
	if err != nil {
		return nil, err
	}
	ac.Logger = opts.Logger
	return ac, nil
}

// NewMirror builds the memory function's handler when AgentCore Memory
// is on: it mirrors the sessions table's stream into AgentCore.
func NewMirror(cfg *Config, ddb ddbhistory.DynamoDBAPI, opts Options) (*agentcore.Mirror, error) {
	ac, err := agentCoreMemory(cfg, ddb, opts)
	if err != nil {
		return nil, err
	}
	if ac == nil {
		return nil, errors.New("AGENTCORE_MEMORY_ID is not set")
	}
	sessions, err := ddbhistory.New(ddb, StoreConfig(cfg))
	if err != nil {
		return nil, err
	}
	m := &agentcore.Mirror{Memory: ac, Sessions: sessions, Logger: opts.Logger}
	if opts.Metrics != nil {
		m.Metrics = &telemetry.Metrics{Namespace: cfg.MetricsNamespace, Function: cfg.FunctionName, Out: opts.Metrics}
	}
	return m, nil
}

// NewExtractor builds the memory function's handler from cfg: it learns
// from the sessions table's stream, calling the extraction model
// (MEMORY_MODEL_ID, or MODEL_ID) through converse.
func NewExtractor(cfg *Config, converse bedrock.ConverseAPI, ddb ddbhistory.DynamoDBAPI, opts Options) (*memory.Extractor, error) {
	on := *cfg // the memory function learns whatever MEMORY says
	on.Memory.Enabled = true
	cfg = &on
	mem, err := memoryStore(cfg, ddb, opts)
	if err != nil {
		return nil, err
	}
	sessions, err := ddbhistory.New(ddb, StoreConfig(cfg))
	if err != nil {
		return nil, err
	}
	model, err := bedrock.New(converse, bedrock.Config{ModelID: cmp.Or(cfg.Memory.ModelID, cfg.ModelID), MaxTokens: extractionMaxTokens})
	if err != nil {
		return nil, err
	}
	return &memory.Extractor{Store: mem, Sessions: sessions, Model: model, Kinds: cfg.Memory.Kinds, Logger: opts.Logger}, nil
}

// extractionMaxTokens bounds an extraction's answer: twenty operations of
// a record each.
const extractionMaxTokens = 4096

// cardOf is what the A2A agent card says of cfg's agent.
func cardOf(cfg *Config) a2a.CardConfig {
	card := a2a.CardConfig{
		Name: cfg.A2A.Name, Description: cfg.A2A.Description, Version: "1",
		PublicURL: cfg.A2A.PublicURL,
		Tools:     slices.Clone(cfg.Tools),
	}
	for _, t := range cfg.LambdaTools {
		if len(t.Agents) == 0 {
			card.Tools = append(card.Tools, t.Name)
		}
	}
	for _, s := range cfg.Agents {
		card.Agents = append(card.Agents, a2a.Skill{Name: s.Name, Description: s.Description})
	}
	return card
}

// pricesOf returns the prices of cfg's model: MODEL_PRICES, or else the
// table's, or false when neither knows the model.
// subAgentModels returns the models of the sub-agents that call one of
// their own, by name, and its prices, from the table (nil when it does not
// know the model): MODEL_PRICES is the prices of MODEL_ID alone.
func subAgentModels(cfg *Config) (map[string]string, map[string]*pricing.Prices) {
	var models map[string]string
	var prices map[string]*pricing.Prices
	for _, sa := range cfg.Agents {
		if sa.ModelID == "" || sa.ModelID == cfg.ModelID {
			continue
		}
		if models == nil {
			models, prices = map[string]string{}, map[string]*pricing.Prices{}
		}
		models[sa.Name] = sa.ModelID
		if p, ok := pricing.Lookup(sa.ModelID); ok {
			prices[sa.Name] = &p
		} else {
			prices[sa.Name] = nil
		}
	}
	return models, prices
}

func pricesOf(cfg *Config) (pricing.Prices, bool) {
	if cfg.Prices != nil {
		return *cfg.Prices, true
	}
	return pricing.Lookup(cfg.ModelID)
}

// StoreConfig is the session store's configuration for cfg.
func StoreConfig(cfg *Config) ddbhistory.Config {
	return ddbhistory.Config{
		Table: cfg.TableName,
		TTL:   time.Duration(cfg.SessionTTLDays) * 24 * time.Hour,
		// Load reads the window a turn starts from: the manager's size, plus
		// the last turn's input and answer.
		WindowHint: cfg.WindowSize + 2,
	}
}

// SchemaCompiler compiles a JSON Schema that a caller supplies, as
// schema.Compile does.
type SchemaCompiler = func(json.RawMessage) (agent.Schema, error)

// newAgent builds the agent from cfg, calling Bedrock through client, with
// the retry policy and the logger of opts; tracing traces its model calls
// and tool runs.
func newAgent(cfg *Config, client bedrock.ConverseAPI, opts Options, tracing *telemetry.Tracing, mem *memory.Store, ac *agentcore.Memory) (*agent.Agent, error) {
	w := &wiring{cfg: cfg, client: client, opts: opts, tracing: tracing, models: map[string]agent.Model{}}
	model, err := w.model(cfg.ModelID)
	if err != nil {
		return nil, err
	}
	manager, err := w.manager(cfg.Manager, cfg.WindowSize, cfg.WindowLowWater, model)
	if err != nil {
		return nil, err
	}
	builtins, err := tools.ByName(cfg.Tools)
	if err != nil {
		return nil, err
	}
	direct := cfg.DirectTools
	if direct == nil { // the enabled built-ins
		for _, t := range builtins {
			direct = append(direct, t.Spec().Name)
		}
	}
	if len(cfg.LambdaTools) > 0 && runsTools(opts) {
		if opts.Remote.Lambda == nil {
			return nil, errors.New("app: LAMBDA_TOOLS is set, and no Lambda client was given")
		}
		builtins = append(builtins, remote.LambdaTools(opts.Remote.Lambda, cfg.LambdaTools, cmp.Or(opts.Logger, slog.Default()))...)
	}
	for i, t := range builtins {
		if slices.Contains(cfg.ApprovalTools, t.Spec().Name) {
			builtins[i] = agent.RequireApproval(t)
		}
	}
	var names []string
	for _, t := range builtins {
		names = append(names, t.Spec().Name)
	}
	sets, agentSets, err := mcpTools(cfg, opts, names)
	if err != nil {
		return nil, err
	}
	a2aSet, a2aAgentSets, err := a2aTools(cfg, opts)
	if err != nil {
		return nil, err
	}
	sets = append(sets, a2aSet...)
	if agentSets == nil {
		agentSets = map[string][]agent.ToolSet{}
	}
	for name, s := range a2aAgentSets {
		agentSets[name] = append(agentSets[name], s...)
	}
	delegations, err := subAgents(cfg, builtins, func(sa SubAgent, tools []agent.Tool) (*agent.Agent, error) {
		model, err := w.model(cmp.Or(sa.ModelID, cfg.ModelID))
		if err != nil {
			return nil, err
		}
		manager, err := w.agentManager(sa, model)
		if err != nil {
			return nil, err
		}
		return agent.New(agent.Config{
			Model:                   model,
			System:                  sa.SystemPrompt,
			Tools:                   tools,
			ToolSets:                agentSets[sa.Name],
			Manager:                 manager,
			MaxCycles:               cmp.Or(sa.MaxCycles, cfg.MaxCycles),
			Retry:                   opts.Retry,
			InterruptTTL:            cfg.InterruptTTL, // its pause is the whole turn's
			MaxToolResultBytes:      cfg.MaxToolResultBytes,
			MaxToolResultMediaBytes: cfg.MaxToolResultMediaBytes,
			PromptCache:             cfg.PromptCache,
			RedactedInput:           cfg.GuardrailRedactedInput,
			Hooks:                   hooks(cmp.Or(opts.Logger, slog.Default()), tracing),
		})
	})
	if err != nil {
		return nil, err
	}
	// The Lambda tools whose entries name agents are theirs alone.
	mains := slices.DeleteFunc(slices.Clone(builtins), func(t agent.Tool) bool {
		return slices.ContainsFunc(cfg.LambdaTools, func(lt remote.LambdaTool) bool { return lt.Agents != nil && lt.Name == t.Spec().Name })
	})
	switch {
	case mem != nil:
		mains = append(mains, memory.SearchTool(mem))
	case ac != nil:
		mains = append(mains, memory.SearchTool(ac))
	}
	return agent.New(agent.Config{
		Model:                   model,
		System:                  cfg.SystemPrompt,
		Tools:                   append(mains, delegations...),
		ToolSets:                sets,
		Manager:                 manager,
		MaxCycles:               cfg.MaxCycles,
		ContextWindowTokens:     cfg.ContextWindowTokens,
		Retry:                   opts.Retry,
		InterruptTTL:            cfg.InterruptTTL,
		DirectTools:             direct,
		MaxToolResultBytes:      cfg.MaxToolResultBytes,
		MaxToolResultMediaBytes: cfg.MaxToolResultMediaBytes,
		TrimResults:             agent.ResultTrim{KeepTurns: cfg.TrimTurns, MinBytes: cfg.TrimBytes},
		PromptCache:             cfg.PromptCache,
		RedactedInput:           cfg.GuardrailRedactedInput,
		Hooks:                   hooks(cmp.Or(opts.Logger, slog.Default()), tracing),
	})
}

// wiring builds the agents' models and conversation managers, each model
// once, however many agents call it.
type wiring struct {
	cfg        *Config
	client     bedrock.ConverseAPI
	opts       Options
	tracing    *telemetry.Tracing
	models     map[string]agent.Model // by model id
	summarizer agent.Model            // SUMMARIZER_MODEL_ID's, once built
}

// model returns the model id, on Bedrock with the answers' settings and
// the guardrail, traced under its id. The agent retries it.
func (w *wiring) model(id string) (agent.Model, error) {
	if m, ok := w.models[id]; ok {
		return m, nil
	}
	bc := w.bedrockConfig(id)
	if w.cfg.GuardrailID != "" {
		// The trace says whether the guardrail blocked the input, which a
		// turn then stores redacted, or the answer.
		bc.Guardrail = &bedrock.Guardrail{ID: w.cfg.GuardrailID, Version: w.cfg.GuardrailVersion, Trace: true}
	}
	bm, err := bedrock.New(w.client, bc)
	if err != nil {
		return nil, err
	}
	w.models[id] = w.tracing.Model(bm, id)
	return w.models[id], nil
}

func (w *wiring) bedrockConfig(id string) bedrock.Config {
	return bedrock.Config{ModelID: id, MaxTokens: w.cfg.MaxTokens, Temperature: w.cfg.Temperature}
}

// agentManager returns the conversation manager of sub-agent sa, which
// calls model: its own kind and window, or else the main agent's. A window
// of its own is cut back to half of it; WINDOW_LOW_WATER is WINDOW_SIZE's.
func (w *wiring) agentManager(sa SubAgent, model agent.Model) (agent.ConversationManager, error) {
	low := w.cfg.WindowLowWater
	if sa.WindowSize != 0 {
		low = 0
	}
	return w.manager(cmp.Or(sa.Manager, w.cfg.Manager), cmp.Or(sa.WindowSize, w.cfg.WindowSize), low, model)
}

// manager returns the conversation manager kind, as CONVERSATION_MANAGER
// spells it, over a window of size messages that the sliding window cuts
// back to low, for an agent that calls model: the summaries are its
// model's, or SUMMARIZER_MODEL_ID's.
func (w *wiring) manager(kind string, size, low int, model agent.Model) (agent.ConversationManager, error) {
	switch kind {
	case "none":
		return agent.NoManager{}, nil
	case "summarizing":
		summarizer := model
		if id := w.cfg.SummarizerModelID; id != "" {
			if w.summarizer == nil {
				bc := w.bedrockConfig(id) // no guardrail: the summary is of text the guardrail already saw
				sm, err := bedrock.New(w.client, bc)
				if err != nil {
					return nil, err
				}
				w.summarizer = w.tracing.Model(sm, id)
			}
			summarizer = w.summarizer
		}
		return agent.Summarizing{
			Model:          agent.Retrying(summarizer, summaryRetry(w.opts.Retry)),
			Ratio:          w.cfg.SummaryRatio,
			PreserveRecent: w.cfg.PreserveRecent,
			MaxMessages:    size,
		}, nil
	}
	return agent.SlidingWindow{Size: size, LowWater: low}, nil
}

// subAgents builds the sub-agents of cfg.Agents with build, each offered
// its tools from tools and its delegations, and returns the main agent's
// delegations: one per sub-agent.
func subAgents(cfg *Config, tools []agent.Tool, build func(SubAgent, []agent.Tool) (*agent.Agent, error)) ([]agent.Tool, error) {
	byName := map[string]agent.Tool{}
	for _, t := range tools {
		byName[t.Spec().Name] = t
	}
	configs := map[string]SubAgent{}
	for _, sa := range cfg.Agents {
		configs[sa.Name] = sa
	}
	// AGENTS has no cycles (parseAgents), so the recursion ends.
	delegations := map[string]agent.Tool{}
	var delegation func(sa SubAgent) (agent.Tool, error)
	delegation = func(sa SubAgent) (agent.Tool, error) {
		if d, ok := delegations[sa.Name]; ok {
			return d, nil
		}
		var offered []agent.Tool
		for _, n := range sa.Tools {
			if sub, ok := configs[n]; ok {
				d, err := delegation(sub)
				if err != nil {
					return nil, err
				}
				offered = append(offered, d)
			} else if t, ok := byName[n]; ok {
				offered = append(offered, t)
			}
		}
		a, err := build(sa, offered)
		if err != nil {
			return nil, fmt.Errorf("app: agent %s: %w", sa.Name, err)
		}
		var opts []agent.DelegateOption
		if sa.Fresh {
			opts = append(opts, agent.Fresh())
		}
		delegations[sa.Name] = agent.Delegate(sa.Name, sa.Description, a, opts...)
		return delegations[sa.Name], nil
	}
	var out []agent.Tool
	for _, sa := range cfg.Agents {
		d, err := delegation(sa)
		if err != nil {
			return nil, err
		}
		out = append(out, d)
	}
	return out, nil
}

// hooks are the agent's hooks: the warnings of failed tool runs and of
// retried model calls, and the tool runs' spans.
func hooks(logger *slog.Logger, tracing *telemetry.Tracing) agent.Hooks {
	h := agent.Hooks{
		AfterToolCall: []func(context.Context, *agent.AfterToolCallEvent){logToolErrors(logger)},
		ModelRetry:    []func(context.Context, *agent.ModelRetryEvent){logRetries(logger)},
	}
	tracing.TraceTools(&h)
	return h
}

// logRetries returns a hook that logs each retry of a model call, at
// warning level, with its cause: a turn that succeeds after throttling
// is slower and dearer, and only this line tells why.
func logRetries(logger *slog.Logger) func(context.Context, *agent.ModelRetryEvent) {
	return func(ctx context.Context, e *agent.ModelRetryEvent) {
		logger.LogAttrs(ctx, slog.LevelWarn, "model call retried",
			slog.Int("attempt", e.Attempt),
			slog.String("kind", e.Err.Kind.String()),
			slog.String("code", e.Err.Code),
			slog.Int64("wait_ms", e.Wait.Milliseconds()),
			slog.String("error", agent.Clip(e.Err.Error(), maxLoggedError)),
		)
	}
}

// runsTools reports whether the function serves chat turns, which run
// tools. The structured function's turns offer the model the schema alone,
// so it neither lists remote tools nor reads their secrets, and its role
// may not.
func runsTools(opts Options) bool {
	return cmp.Or(opts.Routes, httpapi.AllRoutes)&^httpapi.StructuredRoutes != 0
}

// mcpTools returns the tool sets of cfg's MCP servers, whose listing has
// begun: the main agent's, of the servers whose entries name no agents,
// and each sub-agent's, of those that name it. A server whose secrets
// cannot be read is left out, with an error in the log: the function
// still starts, and serves every other tool.
func mcpTools(cfg *Config, opts Options, taken []string) (main []agent.ToolSet, byAgent map[string][]agent.ToolSet, err error) {
	if len(cfg.MCPServers) == 0 || !runsTools(opts) {
		return nil, nil, nil
	}
	logger := cmp.Or(opts.Logger, slog.Default())
	servers := cfg.MCPServers
	if slices.ContainsFunc(servers, func(s remote.MCPServer) bool { return len(s.SecretHeaders) > 0 }) {
		if opts.Remote.SSM == nil {
			return nil, nil, errors.New("app: MCP_SERVERS names secret headers, and no SSM client was given")
		}
		ctx, cancel := context.WithTimeout(context.Background(), ssmTimeout)
		defer cancel()
		var errs []error
		servers, errs = remote.ResolveSecrets(ctx, opts.Remote.SSM, servers)
		for _, err := range errs {
			logger.Error("MCP server left out", "error", err.Error())
		}
	}
	set := remote.NewMCP(servers, remote.MCPOptions{HTTPClient: opts.Remote.HTTP, Logger: logger, Approval: cfg.ApprovalTools, Taken: taken})
	set.Start()
	main, byAgent = byAudience(servers, func(s remote.MCPServer) (string, []string) { return s.Name, s.Agents }, set.Only)
	return main, byAgent, nil
}

// byAudience splits a tool set of entries between the main agent, which
// gets those that name no sub-agents, and the sub-agents each entry names:
// only gives the set's part of the entries it is given, by name.
func byAudience[E any, S agent.ToolSet](entries []E, audience func(E) (name string, agents []string), only func(...string) S) (main []agent.ToolSet, byAgent map[string][]agent.ToolSet) {
	var shared []string
	names := map[string][]string{} // the entries of each sub-agent
	for _, e := range entries {
		name, agents := audience(e)
		if agents == nil {
			shared = append(shared, name)
		}
		for _, a := range agents {
			names[a] = append(names[a], name)
		}
	}
	if len(shared) > 0 {
		main = []agent.ToolSet{only(shared...)}
	}
	byAgent = map[string][]agent.ToolSet{}
	for a, n := range names {
		byAgent[a] = []agent.ToolSet{only(n...)}
	}
	return main, byAgent
}

// a2aTools returns the tool sets of cfg's remote A2A agents, whose cards
// are being fetched: the main agent's, of the agents whose entries name no
// sub-agents, and each sub-agent's, of those that name it. An agent whose
// secrets cannot be read is left out, with an error in the log, as an MCP
// server is.
func a2aTools(cfg *Config, opts Options) (main []agent.ToolSet, byAgent map[string][]agent.ToolSet, err error) {
	byAgent = map[string][]agent.ToolSet{}
	if len(cfg.A2AAgents) == 0 || !runsTools(opts) {
		return nil, byAgent, nil
	}
	logger := cmp.Or(opts.Logger, slog.Default())
	agents := cfg.A2AAgents
	if slices.ContainsFunc(agents, func(a remote.A2AAgent) bool { return len(a.SecretHeaders) > 0 }) {
		if opts.Remote.SSM == nil {
			return nil, nil, errors.New("app: A2A_AGENTS names secret headers, and no SSM client was given")
		}
		ctx, cancel := context.WithTimeout(context.Background(), ssmTimeout)
		defer cancel()
		var errs []error
		agents, errs = remote.ResolveA2ASecrets(ctx, opts.Remote.SSM, agents)
		for _, err := range errs {
			logger.Error("A2A agent left out", "error", err.Error())
		}
	}
	set := remote.NewA2A(agents, remote.A2AOptions{Logger: logger, Credentials: opts.Remote.Credentials, Approval: cfg.ApprovalTools})
	set.Start()
	main, byAgent = byAudience(agents, func(a remote.A2AAgent) (string, []string) { return a.Name, a.Agents }, set.Only)
	return main, byAgent, nil
}

// logToolErrors returns a hook that logs each tool run whose result is an
// error, at warning level. The model gets the error and the turn goes on, so
// without this line a failing tool, or one that panics, is invisible to an
// operator. Registered first, it runs after every other AfterToolCall hook,
// and logs the result the model receives.
func logToolErrors(logger *slog.Logger) func(context.Context, *agent.AfterToolCallEvent) {
	return func(ctx context.Context, e *agent.AfterToolCallEvent) {
		if e.Result.Status != agent.ToolError {
			return
		}
		var text strings.Builder
		for _, c := range e.Result.Content {
			text.WriteString(c.Text)
		}
		logger.LogAttrs(ctx, slog.LevelWarn, "tool failed",
			slog.String("tool", e.Use.Name),
			slog.String("tool_use_id", e.Use.ToolUseID),
			slog.Int64("duration_ms", e.Duration.Milliseconds()),
			slog.String("error", agent.Clip(text.String(), maxLoggedError)),
		)
	}
}

// maxLoggedError bounds the error text of a tool line, in bytes: enough for
// any message of ours, while a tool's own error may quote its whole input.
const maxLoggedError = 512

// summaryRetry is the policy of the summarizer's calls: the turn's, but
// fewer, since a summary that fails leaves the turn to reduce otherwise.
func summaryRetry(p agent.RetryPolicy) agent.RetryPolicy {
	p.MaxAttempts = min(cmp.Or(p.MaxAttempts, 3), 3)
	return p
}

// NewFromEnv reads the configuration and the AWS settings from the
// environment and builds the application: what a function does at init.
// The clients' endpoints come from the SDK's standard settings, so
// AWS_ENDPOINT_URL_DYNAMODB and AWS_ENDPOINT_URL_BEDROCK_RUNTIME redirect
// them without any setting of ours.
func NewFromEnv(ctx context.Context, getenv func(string) string, opts Options) (*App, error) {
	cfg, awsCfg, err := fromEnv(ctx, getenv)
	if err != nil {
		return nil, err
	}
	// The remote tools' clients exist only when the configuration uses
	// them, as AWS_ENDPOINT_URL_LAMBDA and AWS_ENDPOINT_URL_SSM redirect.
	if len(cfg.LambdaTools) > 0 && runsTools(opts) && opts.Remote.Lambda == nil {
		opts.Remote.Lambda = lambda.NewFromConfig(awsCfg)
	}
	if len(cfg.A2AAgents) > 0 || cfg.A2AAgentsPath != "" {
		opts.Remote.Credentials = cmp.Or(opts.Remote.Credentials, awsCfg.Credentials)
	}
	var params *ssm.Client
	if ((len(cfg.MCPServers) > 0 || cfg.AgentsPath != "" || cfg.A2AAgentsPath != "" || len(cfg.A2AAgents) > 0) && runsTools(opts)) || cfg.SystemPromptParam != "" {
		params = ssm.NewFromConfig(awsCfg)
		if opts.Remote.SSM == nil && runsTools(opts) {
			opts.Remote.SSM = params
		}
	}
	if err := LoadSystemPrompt(ctx, params, cfg); err != nil {
		return nil, err
	}
	// The agents of an AGENTS path are read only by the functions that
	// run tools: the structured function offers the model none, so it
	// needs no agents, and its role may not read them.
	if cfg.AgentsPath != "" && runsTools(opts) {
		if err := LoadAgents(ctx, params, cfg); err != nil {
			return nil, err
		}
	}
	if cfg.A2AAgentsPath != "" && runsTools(opts) {
		if err := LoadA2AAgents(ctx, params, cfg); err != nil {
			return nil, err
		}
	}
	if cfg.AgentCore.MemoryID != "" && opts.AgentCore == nil {
		opts.AgentCore = bedrockagentcore.NewFromConfig(awsCfg)
	}
	a, err := New(cfg, bedrockruntime.NewFromConfig(awsCfg), dynamodb.NewFromConfig(awsCfg), opts)
	if err == nil && opts.Metrics != nil && telemetry.MetricsDropped(getenv) {
		cmp.Or(opts.Logger, slog.Default()).Warn("metrics dropped: Lambda filters logs below " + getenv("AWS_LAMBDA_LOG_LEVEL") +
			", and counts the metrics lines, which have no level, as INFO; set the log level to INFO or lower")
	}
	return a, err
}

// StreamHandler handles a batch of the sessions table's stream records:
// the memory function's handler.
type StreamHandler func(context.Context, events.DynamoDBEvent) (events.DynamoDBEventResponse, error)

// NewStreamHandlerFromEnv builds the memory function's handler from the
// environment, with AWS clients from the default configuration chain: it
// mirrors into AgentCore Memory when AGENTCORE_MEMORY_ID is set, and
// learns the built-in memory otherwise.
func NewStreamHandlerFromEnv(ctx context.Context, getenv func(string) string, opts Options) (StreamHandler, error) {
	cfg, awsCfg, err := fromEnv(ctx, getenv)
	if err != nil {
		return nil, err
	}
	if cfg.AgentCore.MemoryID != "" {
		opts.AgentCore = bedrockagentcore.NewFromConfig(awsCfg)
		m, err := NewMirror(cfg, dynamodb.NewFromConfig(awsCfg), opts)
		if err != nil {
			return nil, err
		}
		return m.Handle, nil
	}
	x, err := NewExtractor(cfg, bedrockruntime.NewFromConfig(awsCfg), dynamodb.NewFromConfig(awsCfg), opts)
	if err != nil {
		return nil, err
	}
	return counted(x.Handle, cfg, opts), nil
}

// counted is h with each batch's records and failures counted in opts'
// metrics, as the mirror counts its own.
func counted(h StreamHandler, cfg *Config, opts Options) StreamHandler {
	if opts.Metrics == nil {
		return h
	}
	m := &telemetry.Metrics{Namespace: cfg.MetricsNamespace, Function: cfg.FunctionName, Out: opts.Metrics}
	return func(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
		resp, err := h(ctx, ev)
		m.Counts(ctx, map[string]int{memory.MetricRecords: len(ev.Records), memory.MetricFailed: len(resp.BatchItemFailures)})
		return resp, err
	}
}

// fromEnv reads the configuration from the environment, and the AWS
// configuration from the default chain, its HTTP client wrapped.
func fromEnv(ctx context.Context, getenv func(string) string) (*Config, aws.Config, error) {
	cfg, err := ConfigFromEnv(getenv)
	if err != nil {
		return nil, aws.Config{}, err
	}
	awsCfg, err := awsconfig.LoadDefaultConfig(ctx)
	if err != nil {
		return nil, aws.Config{}, fmt.Errorf("load AWS configuration: %w", err)
	}
	awsCfg.HTTPClient = sdkhttp.Wrap(awsCfg.HTTPClient)
	return cfg, awsCfg, nil
}

// Package devrun is the local run: the functions' routes, and the chat
// page, served on a laptop without an AWS account. It serves the handler
// the Lambda functions run (httpapi) directly, as an http.Handler, with no
// event translation: only the deadline and the caller's identity, which
// Lambda and API Gateway would supply, are added.
//
// DynamoDB is embedded (minidyn, in the process) unless
// AWS_ENDPOINT_URL_DYNAMODB points elsewhere. Bedrock is the real service
// when AWS credentials are found, or AWS_ENDPOINT_URL_BEDROCK_RUNTIME names
// an endpoint; otherwise an offline model that speaks the Converse protocol
// answers, and the run says so when it starts.
//
// Long-term memory is on unless Options.NoMemory: the run's one
// unauthenticated user counts as one person, and the memory function's
// work, learning from each commit, runs in the process, on the table's
// writes as a DynamoDB stream would deliver them (streamtest), with the
// same model as the turns.
package devrun

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/feature/ec2/imds"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/lambda"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	"github.com/lambda-agent/lambda-agent/internal/app"
	"github.com/lambda-agent/lambda-agent/internal/ddbhistory"
	"github.com/lambda-agent/lambda-agent/internal/devrun/offline"
	"github.com/lambda-agent/lambda-agent/internal/httpapi"
	"github.com/lambda-agent/lambda-agent/internal/memory"
	"github.com/lambda-agent/lambda-agent/internal/remote"
	"github.com/lambda-agent/lambda-agent/internal/schema"
	"github.com/lambda-agent/lambda-agent/internal/sdkhttp"
	"github.com/lambda-agent/lambda-agent/internal/testkit/dynamodbtest"
	"github.com/lambda-agent/lambda-agent/internal/testkit/streamtest"
)

// Options configure a local run.
type Options struct {
	// Addr is where to listen; empty means DefaultAddr.
	Addr string
	// Offline uses the offline model even when AWS credentials are found.
	Offline bool
	// Getenv reads the environment; the functions' variables apply.
	Getenv func(string) string
	// Out gets the banner and the logs.
	Out io.Writer
	// Ready, when set, is called with the base URL once the server listens.
	Ready func(url string)
	// MCP are the endpoints of MCP servers whose tools the agent may use,
	// beside those MCP_SERVERS names: each is a server named mcp, mcp2 and
	// on, whose tools' names start with that name and _.
	MCP []string
	// A2A are remote agents the agent may call as tools, beside those
	// A2A_AGENTS names: each a card's URL, or the base URL of an agent
	// whose card is at /.well-known/agent-card.json, named a2a, a2a2 and
	// on.
	A2A []string
	// OTel, when set, is an OTLP/HTTP endpoint, such as a local Jaeger's
	// http://localhost:4318, that the turns' traces are sent to, as
	// OTEL_EXPORTER_OTLP_ENDPOINT would.
	OTel string
	// NoMemory turns long-term memory off, as MEMORY=off does.
	NoMemory bool
}

// Defaults of the local run, for the variables a deployment must set.
const (
	DefaultAddr    = "127.0.0.1:3000"
	DefaultTable   = "lambda-agent-local"
	DefaultModelID = "us.anthropic.claude-sonnet-4-5-20250929-v1:0"
	offlineModelID = "offline"
)

// Run serves until ctx ends.
func Run(ctx context.Context, opts Options) error {
	logger := slog.New(slog.NewTextHandler(opts.Out, nil))
	getenv := opts.Getenv
	env := func(k, def string) string { return cmp.Or(getenv(k), def) }

	awsCfg, err := awsconfig.LoadDefaultConfig(ctx,
		awsconfig.WithRegion(env("AWS_REGION", env("AWS_DEFAULT_REGION", "us-east-1"))),
		// Off a cloud host, the instance metadata service only makes the
		// credential search slow.
		awsconfig.WithEC2IMDSClientEnableState(imds.ClientDisabled),
	)
	if err != nil {
		return fmt.Errorf("load AWS configuration: %w", err)
	}
	awsCfg.HTTPClient = sdkhttp.Wrap(awsCfg.HTTPClient)

	// DynamoDB: the one named by the SDK's settings, or an embedded one.
	var ddb *dynamodb.Client
	ddbWhere := getenv("AWS_ENDPOINT_URL_DYNAMODB")
	if ddbWhere == "" {
		srv, err := dynamodbtest.NewServer("")
		if err != nil {
			return err
		}
		defer srv.Close()
		ddb = srv.Client()
		ddbWhere = "embedded (in memory, " + srv.URL + ")"
	} else {
		ddb = dynamodb.NewFromConfig(awsCfg, func(o *dynamodb.Options) {
			if !hasCredentials(ctx, awsCfg) {
				o.Credentials = credentials.NewStaticCredentialsProvider("local", "local", "")
			}
		})
	}

	// Bedrock: the real service, an endpoint the SDK's settings name, or
	// the offline model.
	modelDefault := DefaultModelID
	var bedrock *bedrockruntime.Client
	var modelWhere string
	info := Info{Model: "bedrock"} // what the chat page shows
	switch {
	case !opts.Offline && getenv("AWS_ENDPOINT_URL_BEDROCK_RUNTIME") != "":
		bedrock = bedrockruntime.NewFromConfig(awsCfg, func(o *bedrockruntime.Options) {
			if !hasCredentials(ctx, awsCfg) {
				o.Credentials = credentials.NewStaticCredentialsProvider("local", "local", "")
			}
		})
		modelWhere = "Bedrock at " + getenv("AWS_ENDPOINT_URL_BEDROCK_RUNTIME")
		info.Where = modelWhere
	case !opts.Offline && hasCredentials(ctx, awsCfg):
		bedrock = bedrockruntime.NewFromConfig(awsCfg)
		info.Where = "Amazon Bedrock in " + awsCfg.Region
		modelWhere = info.Where + " (AWS credentials found)"
	default:
		srv := offline.NewServer()
		defer srv.Close()
		bedrock = srv.Client()
		modelDefault = offlineModelID
		modelWhere = "the OFFLINE model: no AWS credentials found, so canned replies (echo, calculator, memory, time, structured output)"
		info = Info{Model: "offline", Where: "No AWS credentials were found"}
		if opts.Offline {
			modelWhere = "the OFFLINE model (asked for), with canned replies"
			info.Where = "The local run was started with -offline"
		}
	}

	cfg, err := app.ConfigFromEnv(func(k string) string {
		switch k {
		case "TABLE_NAME":
			return env(k, DefaultTable)
		case "MODEL_ID":
			return env(k, modelDefault)
		case "OTEL_EXPORTER_OTLP_ENDPOINT":
			return cmp.Or(opts.OTel, getenv(k))
		case "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT":
			if opts.OTel != "" {
				return "" // -otel wins over the environment
			}
			return getenv(k)
		case "OTEL_SERVICE_NAME":
			return env(k, "lambda-agent-local")
		case "AUDIT": // what the model saw, for each answer: docs/audit.md
			return env(k, "on")
		case "AWS_REGION": // the Region of the calls, whose ARNs ADDITIONAL_MODEL_ARNS lists
			return awsCfg.Region
		case "MEMORY":
			if opts.NoMemory {
				return "off"
			}
			return env(k, "on")
		}
		return getenv(k)
	})
	if err != nil {
		return err
	}
	if cfg.MCPServers, err = withMCP(cfg.MCPServers, opts.MCP); err != nil {
		return err
	}
	if cfg.A2AAgents, err = withA2A(cfg.A2AAgents, opts.A2A); err != nil {
		return err
	}
	if cfg.AgentsPath != "" || cfg.A2AAgentsPath != "" { // ssm:/a/path, read from SSM as a function does
		client := ssm.NewFromConfig(awsCfg, func(o *ssm.Options) { localCredentials(ctx, awsCfg, &o.Credentials) })
		if err := app.LoadAgents(ctx, client, cfg); err != nil {
			return err
		}
		if err := app.LoadA2AAgents(ctx, client, cfg); err != nil {
			return err
		}
	}
	if err := ddbhistory.CreateTable(ctx, ddb, cfg.TableName); err != nil {
		return err
	}
	// Memory: the one user of the local run is one person, and the memory
	// function learns from the table's writes in the process.
	var appDDB ddbhistory.DynamoDBAPI = ddb
	var stream *streamtest.Mapping
	memoryWhere := "off (-memory=false or MEMORY=off)"
	if cfg.Memory.Enabled {
		if stream, err = learnInProcess(cfg, bedrock, ddb, logger); err != nil {
			return err
		}
		appDDB = stream
		memoryWhere = "on, learned after each turn in the background; GET /memory lists it, -memory=false turns it off"
		defer drain(stream, opts.Out)
	}
	a, err := app.New(cfg, bedrock, appDDB, app.Options{
		Routes: httpapi.AllRoutes, CompileSchema: schema.Compile, Logger: logger,
		Remote: remoteClients(ctx, cfg, awsCfg), Summary: opts.Out,
		MemoryForAnonymous: true,
	})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", cmp.Or(opts.Addr, DefaultAddr))
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	url := "http://" + ln.Addr().String()
	fmt.Fprintf(opts.Out, `lambda-agent local run on %s
  chat page: %[1]s/
  routes:   POST /chat   POST /chat/stream   GET /sessions   GET /sessions/{sessionId}
            POST /sessions/{sessionId}/tools/{name}   POST /sessions/{sessionId}/rewind
            GET /sessions/{sessionId}/export   POST /sessions/import   POST /sessions/{sessionId}/import
            DELETE /sessions/{sessionId}   POST /structured
            GET /sessions/{sessionId}/audit   GET /sessions/{sessionId}/audit/{recordId}
            GET /memory   GET /memory/export   DELETE /memory/{recordId}   DELETE /memory
  model:    %s (MODEL_ID=%s)
  dynamodb: %s, table %s
  auth:     bearer JWTs are decoded but not verified, as with sam local; no token means owner "anonymous"
  memory:   %s
  audit:    %s
`, url, modelWhere, cfg.ModelID, ddbWhere, cfg.TableName, memoryWhere, auditWhere(cfg.Audit.Enabled))
	for _, s := range cfg.MCPServers {
		fmt.Fprintf(opts.Out, "  mcp:      %s at %s, tools named %s* (listed in the background; /tool NAME {JSON} calls one offline)\n", s.Name, s.URL, s.ToolPrefix())
	}
	for _, a := range cfg.A2AAgents {
		fmt.Fprintf(opts.Out, "  a2a:      the tool %s calls the agent whose card is %s (/tool %[1]s {\"message\": \"...\"} calls it offline)\n", a.Name, a.CardURL)
	}
	fmt.Fprintf(opts.Out, "  a2a card: %s/.well-known/agent-card.json, JSON-RPC at %[1]s/a2a\n", url)
	if a.Tracing.On() {
		fmt.Fprintf(opts.Out, "  traces:   OTLP/HTTP to %s, service %s\n", cfg.Tracing.Endpoint, cfg.Tracing.ServiceName)
		defer func() { _ = a.Tracing.Shutdown(context.Background()) }() // each request's spans were sent already
	}

	info.ModelID = cfg.ModelID
	srv := &http.Server{Handler: localOnly(Routes(a.Handler, info)), ReadHeaderTimeout: 10 * time.Second}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	if opts.Ready != nil {
		opts.Ready(url)
	}
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// auditWhere says, in the banner, whether the run keeps the audit record.
func auditWhere(on bool) string {
	if on {
		return "on: every model call is kept, and the chat page shows what the model saw under each answer; AUDIT=off turns it off"
	}
	return "off (AUDIT=off): the model calls are not kept"
}

// learnInProcess returns the table's stream, recorded from the writes
// made through ddb and delivered to the memory function's handler, which
// extracts with the turns' model (MEMORY_MODEL_ID, or MODEL_ID, through
// converse) and reads and writes the table through ddb itself: its own
// writes, to memory items, are none that the stream filter passes.
func learnInProcess(cfg *app.Config, converse *bedrockruntime.Client, ddb *dynamodb.Client, logger *slog.Logger) (*streamtest.Mapping, error) {
	x, err := app.NewExtractor(cfg, converse, ddb, app.Options{Logger: logger, MemoryForAnonymous: true})
	if err != nil {
		return nil, err
	}
	return streamtest.New(ddb, streamtest.Config{
		Table:   cfg.TableName,
		Watch:   func(_, sk string) bool { return strings.HasSuffix(sk, "meta") }, // session items
		Filters: []string{memory.StreamFilter},
		Handler: x.Handle,
	}), nil
}

// drainTimeout bounds how long a run that stops waits for memory to learn
// from the turns it served.
const drainTimeout = 10 * time.Second

// drain waits until memory has learned from every commit so far, so that
// a run that stops leaves no extraction running; what it could not learn
// is said on out.
func drain(stream *streamtest.Mapping, out io.Writer) {
	ctx, cancel := context.WithTimeout(context.Background(), drainTimeout)
	defer cancel()
	if err := stream.Drain(ctx); err != nil {
		fmt.Fprintf(out, "memory: stopped before learning from every turn: %v\n", err)
	}
	if n := len(stream.Failed()); n > 0 {
		fmt.Fprintf(out, "memory: %d commits could not be learned from (see the log above)\n", n)
	}
}

// Routes serves the functions' routes with h, as the HTTP API and the
// stream function's URL would: the chat function's, the structured
// function's, the stream at POST /chat/stream, and the chat page at /, with
// what it learns about the local run at GET /local/info. Each request gets
// the deadline its function's invocation would have, and the identity its
// bearer token claims (see Authorize).
//
// A path that a ServeMux would clean, and redirect, goes to h as it is,
// which refuses it as a deployment does (see httpapi.CleanPath).
func Routes(h http.Handler, info Info) http.Handler {
	api := withDeadline(APITimeout, Authorize(h))
	mux := http.NewServeMux()
	mux.Handle("GET /{$}", Page())
	mux.Handle("GET /static/{name}", Page())
	mux.Handle("GET "+InfoPath, info)
	mux.Handle(httpapi.RouteChatStream, withDeadline(StreamTimeout, Authorize(h)))
	mux.Handle(httpapi.RouteA2A, withDeadline(StreamTimeout, Authorize(h)))
	mux.Handle("/", api)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !httpapi.CleanPath(r.URL) {
			api.ServeHTTP(w, r)
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// localOnly refuses what a web page elsewhere could make a browser send to
// the local run, which calls Bedrock with the developer's credentials: a
// request for a host name other than localhost or an IP address (DNS
// rebinding), and a POST without a JSON body (a form or a text/plain fetch,
// which browsers send cross-site without asking first).
func localOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, err := net.SplitHostPort(r.Host)
		if err != nil {
			host = r.Host
		}
		host = strings.Trim(host, "[]")
		switch media, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); {
		case host != "localhost" && net.ParseIP(host) == nil:
			refuse(w, http.StatusMisdirectedRequest, "wrong_host", fmt.Sprintf("the local run answers requests for localhost or an IP address, not %q", r.Host))
		case r.Method == http.MethodPost && media != "application/json":
			refuse(w, http.StatusUnsupportedMediaType, "unsupported_media_type", "a POST to the local run must have Content-Type: application/json")
		default:
			next.ServeHTTP(w, r)
		}
	})
}

func refuse(w http.ResponseWriter, status int, code, message string) {
	body, _ := json.Marshal(map[string]any{"error": map[string]string{"code": code, "message": message}})
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// The invocation deadlines: API Gateway's HTTP API allows 30 s, and
// StreamTimeout is the stream function's timeout in template.yaml.
const (
	APITimeout    = 30 * time.Second
	StreamTimeout = 120 * time.Second
)

// withDeadline gives each request the deadline a Lambda invocation has. It
// does not buffer the response, unlike http.TimeoutHandler, so a stream
// stays a stream.
func withDeadline(d time.Duration, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), d)
		defer cancel()
		h.ServeHTTP(w, r.WithContext(ctx))
	})
}

// hasCredentials reports whether the SDK finds AWS credentials, without
// waiting long for a source that does not answer.
func hasCredentials(ctx context.Context, cfg aws.Config) bool {
	if cfg.Credentials == nil {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	c, err := cfg.Credentials.Retrieve(ctx)
	return err == nil && c.HasKeys()
}

// withMCP adds to servers one for each endpoint, named mcp, mcp2 and on,
// checked as MCP_SERVERS is.
func withMCP(servers []remote.MCPServer, endpoints []string) ([]remote.MCPServer, error) {
	if len(endpoints) == 0 {
		return servers, nil
	}
	all := slices.Clone(servers)
	for i, url := range endpoints {
		name := "mcp"
		if i > 0 {
			name = fmt.Sprintf("mcp%d", i+1)
		}
		all = append(all, remote.MCPServer{Name: name, URL: url})
	}
	raw, err := json.Marshal(all)
	if err != nil {
		return nil, err
	}
	if all, err = remote.ParseMCPServers(string(raw)); err != nil {
		return nil, fmt.Errorf("-mcp: %w", err)
	}
	return all, nil
}

// withA2A adds to agents one for each card URL, named a2a, a2a2 and on,
// checked as A2A_AGENTS is: a URL that is not a card's is taken for the
// base of an agent whose card is at the well-known path.
func withA2A(agents []remote.A2AAgent, cards []string) ([]remote.A2AAgent, error) {
	if len(cards) == 0 {
		return agents, nil
	}
	all := slices.Clone(agents)
	for i, card := range cards {
		name := "a2a"
		if i > 0 {
			name = fmt.Sprintf("a2a%d", i+1)
		}
		if !strings.HasSuffix(card, ".json") {
			card = strings.TrimSuffix(card, "/") + "/.well-known/agent-card.json"
		}
		all = append(all, remote.A2AAgent{Name: name, CardURL: card})
	}
	raw, err := json.Marshal(all)
	if err != nil {
		return nil, err
	}
	if all, err = remote.ParseA2AAgents(string(raw)); err != nil {
		return nil, fmt.Errorf("-a2a: %w", err)
	}
	return all, nil
}

// remoteClients returns the clients of the remote tools cfg names, on the
// SDK's settings: AWS_ENDPOINT_URL_LAMBDA and AWS_ENDPOINT_URL_SSM reach
// stand-ins, with placeholder credentials when there are none.
func remoteClients(ctx context.Context, cfg *app.Config, awsCfg aws.Config) app.Remote {
	var r app.Remote
	if len(cfg.LambdaTools) > 0 {
		r.Lambda = lambda.NewFromConfig(awsCfg, func(o *lambda.Options) { localCredentials(ctx, awsCfg, &o.Credentials) })
	}
	if slices.ContainsFunc(cfg.MCPServers, func(s remote.MCPServer) bool { return len(s.SecretHeaders) > 0 }) ||
		slices.ContainsFunc(cfg.A2AAgents, func(a remote.A2AAgent) bool { return len(a.SecretHeaders) > 0 }) {
		r.SSM = ssm.NewFromConfig(awsCfg, func(o *ssm.Options) { localCredentials(ctx, awsCfg, &o.Credentials) })
	}
	if slices.ContainsFunc(cfg.A2AAgents, func(a remote.A2AAgent) bool { return a.Auth == remote.A2AAuthIAM }) && hasCredentials(ctx, awsCfg) {
		r.Credentials = awsCfg.Credentials // a deployed agent's URL checks real signatures
	}
	return r
}

// localCredentials sets creds to fake ones when no AWS credentials are
// found: the client then reaches a local stand-in that its endpoint
// variable names, which checks only that requests are signed.
func localCredentials(ctx context.Context, awsCfg aws.Config, creds *aws.CredentialsProvider) {
	if !hasCredentials(ctx, awsCfg) {
		*creds = credentials.NewStaticCredentialsProvider("local", "local", "")
	}
}

// Package testkit builds the application the way a function does, on
// stand-ins for the AWS services: the strict Converse stand-in
// (internal/testkit/conversetest) and an in-process DynamoDB (internal/testkit/dynamodbtest).
// Every test of the whole stack, the reliability suite and the bench use
// it, so that the wiring under test is app.New's and nothing else. For the
// built functions, which run as processes of their own, it starts the same
// stand-ins as Backends.
package testkit

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/service/bedrockagentcore"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/agent/bedrock"
	"github.com/lambda-agent/lambda-agent/internal/agentcore"
	"github.com/lambda-agent/lambda-agent/internal/app"
	"github.com/lambda-agent/lambda-agent/internal/ddbhistory"
	"github.com/lambda-agent/lambda-agent/internal/httpapi"
	"github.com/lambda-agent/lambda-agent/internal/memory"
	"github.com/lambda-agent/lambda-agent/internal/schema"
	"github.com/lambda-agent/lambda-agent/internal/testkit/agentcoretest"
	"github.com/lambda-agent/lambda-agent/internal/testkit/conversetest"
	"github.com/lambda-agent/lambda-agent/internal/testkit/dynamodbtest"
	"github.com/lambda-agent/lambda-agent/internal/testkit/streamtest"
)

// Table is the session table's name on the stand-in.
const Table = "sessions"

// FastRetry is the model calls' retry policy in a Stack: the production
// policy's attempts, with waits short enough for a test.
var FastRetry = agent.RetryPolicy{BaseDelay: time.Millisecond, MaxDelay: 5 * time.Millisecond}

// Options configure a Stack. The zero value is the chat and structured
// functions' defaults.
type Options struct {
	// Env is the functions' environment, over TABLE_NAME=sessions and
	// MODEL_ID=test-model.
	Env map[string]string
	// Routes are the routes the handler serves; 0 means all of them.
	Routes httpapi.Routes
	// Retry is the model calls' retry policy; nil means FastRetry.
	Retry *agent.RetryPolicy
	// DynamoDB wraps the transport of the DynamoDB client that the
	// application and the memory function share, to time or break their
	// requests; nil leaves it as it is.
	DynamoDB func(http.RoundTripper) http.RoundTripper
	// DynamoDBOptions adjust the application's DynamoDB client, such as its
	// retryer.
	DynamoDBOptions []func(*dynamodb.Options)
	// AgentCoreOptions adjust the AgentCore client that the application
	// and the memory function share, with AGENTCORE_MEMORY_ID set, such
	// as its retryer: agentcoretest's client makes one attempt a call.
	AgentCoreOptions []func(*bedrockagentcore.Options)
	// Bedrock wraps the transport of the application's Bedrock client.
	Bedrock func(http.RoundTripper) http.RoundTripper
	// Logger gets the handler's lines; nil means Stack.Logs.
	Logger *slog.Logger
	// Remote reaches the remote tools the environment names.
	Remote app.Remote
	// Metrics gets the handler's metrics lines (app.Options.Metrics); nil
	// records none.
	Metrics io.Writer
}

// Stack is the application on stand-ins. Its fields are the parts a test
// drives and inspects.
type Stack struct {
	*app.App
	// Model is the Converse stand-in the agent calls.
	Model *conversetest.Server
	// DDB is the in-process DynamoDB.
	DDB *dynamodbtest.Server
	// Meter counts the application's DynamoDB requests and capacity.
	Meter *dynamodbtest.Meter
	// Logs holds the handler's JSON log lines, unless Options.Logger was
	// set.
	Logs *Buffer
	// With MEMORY=on: Stream is the table's stream, delivered to the
	// memory function's handler, Extractor, as Lambda's event source
	// mapping would with the template's filter; MemoryModel is the
	// extraction model's stand-in, apart from the agent's so that each
	// test scripts them apart.
	Stream      *streamtest.Mapping
	Extractor   *memory.Extractor
	MemoryModel *conversetest.Server
	// MemoryMeter counts the DynamoDB requests of the memory function's
	// deliveries from Stream, apart from the turns' (Meter).
	MemoryMeter *dynamodbtest.Meter
	// With AGENTCORE_MEMORY_ID set: AgentCore is the AgentCore Memory
	// stand-in, which has that memory, and Stream delivers to Mirror, the
	// memory function's handler then, with both of the template's
	// filters.
	AgentCore *agentcoretest.Server
	Mirror    *agentcore.Mirror
}

// New builds a Stack. Close it when done.
func New(ctx context.Context, opts Options) (*Stack, error) {
	vars := map[string]string{"TABLE_NAME": Table, "MODEL_ID": "test-model"}
	for k, v := range opts.Env {
		vars[k] = v
	}
	cfg, err := app.ConfigFromEnv(func(k string) string { return vars[k] })
	if err != nil {
		return nil, err
	}
	b, err := NewBackends(ctx, BackendOptions{})
	if err != nil {
		return nil, err
	}
	s := &Stack{Model: b.Model, DDB: b.DDB, Meter: &dynamodbtest.Meter{}, MemoryMeter: &dynamodbtest.Meter{}, Logs: &Buffer{}}
	// One client, as Options.DynamoDB wraps one transport; the memory
	// function's requests, which its deliveries mark, are metered apart.
	var transport http.RoundTripper = meters{app: s.Meter, memory: s.MemoryMeter}
	if opts.DynamoDB != nil {
		transport = opts.DynamoDB(transport)
	}
	client := s.DDB.Client(append([]func(*dynamodb.Options){func(o *dynamodb.Options) {
		o.HTTPClient = &http.Client{Transport: transport}
	}}, opts.DynamoDBOptions...)...)
	converse := s.Model.Client()
	if opts.Bedrock != nil {
		converse = s.Model.Client(func(o *bedrockruntime.Options) {
			o.HTTPClient = &http.Client{Transport: opts.Bedrock(http.DefaultTransport)}
		})
	}
	var appClient ddbhistory.DynamoDBAPI = client
	var agentCore agentcore.API
	if id := cfg.AgentCore.MemoryID; id != "" {
		s.AgentCore = agentcoretest.NewServer()
		s.AgentCore.AddMemory(id)
		agentCore = s.AgentCore.Client(opts.AgentCoreOptions...)
		s.Stream = streamtest.New(client, streamtest.Config{
			Table:  Table,
			Images: s.DDB.Client(),
			Watch: func(pk, sk string) bool {
				return strings.HasSuffix(sk, "meta") || strings.HasPrefix(pk, "mem#") && sk == "f"
			},
			Filters: []string{memory.StreamFilter, memory.ForgetFilter},
			Handler: func(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
				return s.Mirror.Handle(context.WithValue(ctx, memoryCall{}, true), ev)
			},
		})
		appClient = s.Stream
		if s.Mirror, err = app.NewMirror(cfg, client, app.Options{AgentCore: agentCore, Logger: slog.New(slog.NewJSONHandler(s.Logs, nil)),
			Metrics: opts.Metrics}); err != nil {
			s.Close()
			return nil, err
		}
	}
	if cfg.Memory.Enabled {
		s.MemoryModel = conversetest.NewServer()
		s.Stream = streamtest.New(client, streamtest.Config{
			Table:   Table,
			Images:  s.DDB.Client(),
			Watch:   func(_, sk string) bool { return strings.HasSuffix(sk, "meta") },
			Filters: []string{memory.StreamFilter},
			Handler: func(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
				return s.Extractor.Handle(context.WithValue(ctx, memoryCall{}, true), ev)
			},
		})
		appClient = s.Stream
		if s.Extractor, err = app.NewExtractor(cfg, s.MemoryModel.Client(), client, app.Options{Logger: slog.New(slog.NewJSONHandler(s.Logs, nil))}); err != nil {
			s.Close()
			return nil, err
		}
	}
	retry := FastRetry
	if opts.Retry != nil {
		retry = *opts.Retry
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.NewJSONHandler(s.Logs, nil))
	}
	s.App, err = app.New(cfg, converse, appClient, app.Options{
		Routes:        opts.Routes,
		CompileSchema: schema.Compile,
		Logger:        logger,
		Retry:         retry,
		Remote:        opts.Remote,
		Metrics:       opts.Metrics,
		AgentCore:     agentCore,
	})
	if err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// Start builds a Stack for a test, and closes it when the test ends, failing
// the test if the agent sent a request that Bedrock would reject.
func Start(t testing.TB, opts Options) *Stack {
	t.Helper()
	s, err := New(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	closeAtEnd(t, s.Model, func() {
		s.Close()
		if s.MemoryModel != nil {
			CheckModel(t, s.MemoryModel)
		}
	})
	return s
}

// ConverseServer starts a strict Converse stand-in for t, and closes it when
// t ends, failing t if it saw a request that Bedrock would reject.
func ConverseServer(t testing.TB) *conversetest.Server {
	t.Helper()
	return conversetest.NewChecked(t)
}

// BedrockModel returns the Bedrock model on the stand-in s, with up to 512
// output tokens: the real SDK client, over HTTP.
func BedrockModel(t testing.TB, s *conversetest.Server, modelID string) *bedrock.Model {
	t.Helper()
	m, err := bedrock.New(s.Client(), bedrock.Config{ModelID: modelID, MaxTokens: 512})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// closeAtEnd calls stop when t ends, after failing t if model saw a request
// that Bedrock would reject.
func closeAtEnd(t testing.TB, model *conversetest.Server, stop func()) {
	t.Cleanup(func() {
		CheckModel(t, model)
		stop()
	})
}

// CheckModel fails t if the stand-in saw requests that Bedrock rejects.
func CheckModel(t testing.TB, model *conversetest.Server) {
	t.Helper()
	if v := model.Violations(); len(v) > 0 {
		t.Errorf("requests Bedrock would reject:\n%s", strings.Join(v, "\n"))
	}
}

// DirectStore returns a store on the stand-in's DynamoDB that bypasses the
// application's client.
func (s *Stack) DirectStore() *ddbhistory.Store {
	store, err := ddbhistory.New(s.DDB.Client(), app.StoreConfig(s.Config))
	if err != nil {
		panic(fmt.Sprintf("testkit: a store on a valid configuration: %v", err)) // app.New accepted it
	}
	return store
}

// memoryCall marks the context of the memory function's deliveries.
type memoryCall struct{}

// meters meters the memory function's requests apart from the rest.
type meters struct{ app, memory *dynamodbtest.Meter }

func (m meters) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Context().Value(memoryCall{}) != nil {
		return m.memory.RoundTrip(r)
	}
	return m.app.RoundTrip(r)
}

// Close stops the stand-ins, once the stream has been handled.
func (s *Stack) Close() {
	if s.Stream != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		_ = s.Stream.Drain(ctx)
		cancel()
	}
	if s.MemoryModel != nil {
		s.MemoryModel.Close()
	}
	if s.AgentCore != nil {
		s.AgentCore.Close()
	}
	s.Model.Close()
	s.DDB.Close()
}

// Buffer is a bytes.Buffer that is safe for concurrent writes, such as a
// log's.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

var _ io.Writer = (*Buffer)(nil)

// Write implements io.Writer.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String returns what was written.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

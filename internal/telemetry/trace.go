package telemetry

import (
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// SemconvVersion is the version of the OpenTelemetry semantic conventions
// the spans follow: those for generative AI, for the agent, model and tool
// spans.
const SemconvVersion = "1.40.0"

// scope is the instrumentation scope of the spans.
var scope = instrumentation.Scope{Name: "github.com/lambda-agent/lambda-agent", SchemaURL: "https://opentelemetry.io/schemas/" + SemconvVersion}

// DefaultFlushTimeout bounds the flush of an invocation's spans.
const DefaultFlushTimeout = time.Second

// TracingConfig configures tracing. The zero value traces nothing.
type TracingConfig struct {
	// Endpoint is the URL that OTLP/HTTP requests of traces go to, such as
	// http://localhost:4318/v1/traces; empty turns tracing off.
	Endpoint string
	// Headers are sent with each export, for a backend's credentials.
	Headers map[string]string
	// Gzip compresses the exports.
	Gzip bool
	// Timeout bounds each export; 0 means 10 s, OTLP's default. An
	// invocation's flush is bounded by FlushTimeout too.
	Timeout time.Duration
	// FlushTimeout bounds the flush at the end of an invocation; 0 means
	// DefaultFlushTimeout.
	FlushTimeout time.Duration
	// ServiceName is the service.name of the spans' resource.
	ServiceName string
	// Resource are more attributes of the resource, such as faas.name.
	Resource map[string]string
	// CaptureContent records messages, tool inputs and tool results in
	// the spans. They can hold anything a user wrote, so it is for
	// debugging.
	CaptureContent bool
}

// TracingConfigFromEnv reads the standard OpenTelemetry variables:
//
//   - OTEL_EXPORTER_OTLP_TRACES_ENDPOINT, used as it is, or else
//     OTEL_EXPORTER_OTLP_ENDPOINT, to which /v1/traces is added;
//   - OTEL_EXPORTER_OTLP_PROTOCOL (and _TRACES_): http/protobuf only;
//   - OTEL_EXPORTER_OTLP_HEADERS (and _TRACES_): key=value pairs, comma
//     separated, the values URL-encoded;
//   - OTEL_EXPORTER_OTLP_COMPRESSION (and _TRACES_): gzip or none;
//   - OTEL_EXPORTER_OTLP_TIMEOUT (and _TRACES_), in milliseconds;
//   - OTEL_SERVICE_NAME, else OTEL_RESOURCE_ATTRIBUTES' service.name, else
//     AWS_LAMBDA_FUNCTION_NAME, else lambda-agent;
//   - OTEL_RESOURCE_ATTRIBUTES;
//   - OTEL_SDK_DISABLED=true and OTEL_TRACES_EXPORTER=none, which turn
//     tracing off;
//   - OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true, which
//     records content (CaptureContent).
//
// It reports every variable it cannot use.
func TracingConfigFromEnv(getenv func(string) string) (TracingConfig, error) {
	var errs []error
	traces := func(name string) (string, string) {
		if v := getenv("OTEL_EXPORTER_OTLP_TRACES_" + name); v != "" {
			return "OTEL_EXPORTER_OTLP_TRACES_" + name, v
		}
		return "OTEL_EXPORTER_OTLP_" + name, getenv("OTEL_EXPORTER_OTLP_" + name)
	}
	c := TracingConfig{}
	if v := getenv("OTEL_RESOURCE_ATTRIBUTES"); v != "" {
		r, err := pairs(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("OTEL_RESOURCE_ATTRIBUTES: %w", err))
		}
		c.Resource = r
	}
	c.ServiceName = cmp.Or(getenv("OTEL_SERVICE_NAME"), c.Resource["service.name"], getenv("AWS_LAMBDA_FUNCTION_NAME"), "lambda-agent")
	switch v := strings.ToLower(getenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT")); v {
	case "", "false":
	case "true":
		c.CaptureContent = true
	default:
		errs = append(errs, fmt.Errorf("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT: %q is not true or false", v))
	}
	if v := getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"); v != "" {
		c.Endpoint = v
	} else if v := getenv("OTEL_EXPORTER_OTLP_ENDPOINT"); v != "" {
		c.Endpoint = strings.TrimSuffix(v, "/") + "/v1/traces"
	}
	if c.Endpoint != "" {
		if u, err := url.Parse(c.Endpoint); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs = append(errs, fmt.Errorf("OTLP endpoint %q is not an http or https URL", c.Endpoint))
		}
	}
	if name, v := traces("PROTOCOL"); v != "" && v != "http/protobuf" {
		errs = append(errs, fmt.Errorf("%s: %q is not supported; use http/protobuf", name, v))
	}
	if name, v := traces("HEADERS"); v != "" {
		h, err := pairs(v)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
		}
		c.Headers = h
	}
	switch name, v := traces("COMPRESSION"); v {
	case "", "none":
	case "gzip":
		c.Gzip = true
	default:
		errs = append(errs, fmt.Errorf("%s: %q is not gzip or none", name, v))
	}
	if name, v := traces("TIMEOUT"); v != "" {
		ms, err := strconv.Atoi(v)
		if err != nil || ms <= 0 {
			errs = append(errs, fmt.Errorf("%s: %q is not a positive number of milliseconds", name, v))
		}
		c.Timeout = time.Duration(ms) * time.Millisecond
	}
	c.Resource = withLambda(c.Resource, getenv)
	if strings.EqualFold(getenv("OTEL_SDK_DISABLED"), "true") || getenv("OTEL_TRACES_EXPORTER") == "none" {
		c.Endpoint = ""
	} else if v := getenv("OTEL_TRACES_EXPORTER"); v != "" && v != "otlp" {
		errs = append(errs, fmt.Errorf("OTEL_TRACES_EXPORTER: %q is not supported; use otlp or none", v))
	}
	return c, errors.Join(errs...)
}

// withLambda adds to attrs the resource attributes of the Lambda function
// the environment describes.
func withLambda(attrs map[string]string, getenv func(string) string) map[string]string {
	fn := getenv("AWS_LAMBDA_FUNCTION_NAME")
	if fn == "" {
		return attrs
	}
	if attrs == nil {
		attrs = map[string]string{}
	}
	for k, v := range map[string]string{
		"cloud.provider":     "aws",
		"cloud.platform":     "aws_lambda",
		"cloud.region":       getenv("AWS_REGION"),
		"faas.name":          fn,
		"faas.version":       getenv("AWS_LAMBDA_FUNCTION_VERSION"),
		"faas.max_memory":    getenv("AWS_LAMBDA_FUNCTION_MEMORY_SIZE"),
		"aws.log.group.name": getenv("AWS_LAMBDA_LOG_GROUP_NAME"),
	} {
		if _, set := attrs[k]; !set && v != "" {
			attrs[k] = v
		}
	}
	return attrs
}

// pairs parses OTel's key=value,key=value lists, whose values are
// URL-encoded. Its errors never quote a value: the headers' hold
// credentials.
func pairs(s string) (map[string]string, error) {
	out := map[string]string{}
	i := 0
	for item := range strings.SplitSeq(s, ",") {
		i++
		k, v, ok := strings.Cut(item, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, fmt.Errorf("item %d is not key=value", i)
		}
		value, err := url.PathUnescape(strings.TrimSpace(v))
		if err != nil {
			return nil, fmt.Errorf("the value of %s is not URL-encoded", k)
		}
		out[k] = value
	}
	return out, nil
}

// Tracing traces invocations with OpenTelemetry. With an endpoint, it
// records the spans of each invocation and sends them before the
// invocation returns; without one, it records nothing, and its parts are
// the things they wrap, unchanged. It is safe for concurrent use.
type Tracing struct {
	cfg      TracingConfig
	provider *sdktrace.TracerProvider // nil when off
	tracer   trace.Tracer
	logger   *slog.Logger
}

// NewTracing returns the tracing cfg describes, which logs with logger the
// exports that fail.
func NewTracing(cfg TracingConfig, logger *slog.Logger) *Tracing {
	t := &Tracing{cfg: cfg, logger: logger}
	if cfg.Endpoint == "" {
		return t
	}
	timeout := cfg.Timeout
	if timeout == 0 {
		timeout = 10 * time.Second
	}
	attrs := []attribute.KeyValue{
		attribute.String("service.name", cfg.ServiceName),
		attribute.String("telemetry.sdk.name", "opentelemetry"),
		attribute.String("telemetry.sdk.language", "go"),
		attribute.String("telemetry.sdk.version", sdk.Version()),
	}
	for k, v := range cfg.Resource {
		if k != "service.name" {
			attrs = append(attrs, attribute.String(k, v))
		}
	}
	// The SDK reports what fails outside a call, such as an export the
	// batch processor starts on its own between flushes, to OpenTelemetry's
	// global handler: the log's.
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		logger.LogAttrs(context.Background(), slog.LevelWarn, "OpenTelemetry failed", slog.String("error", err.Error()))
	}))
	exp := &exporter{url: cfg.Endpoint, headers: cfg.Headers, gzip: cfg.Gzip, client: &http.Client{Timeout: timeout}}
	t.provider = sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp),
		sdktrace.WithIDGenerator(xrayIDs{}),
		sdktrace.WithResource(resource.NewSchemaless(attrs...)),
	)
	t.tracer = t.provider.Tracer(scope.Name, trace.WithSchemaURL(scope.SchemaURL))
	return t
}

// On says whether spans are recorded and exported.
func (t *Tracing) On() bool { return t != nil && t.provider != nil }

// Shutdown sends what is left and stops the exporter.
func (t *Tracing) Shutdown(ctx context.Context) error {
	if !t.On() {
		return nil
	}
	return t.provider.Shutdown(ctx)
}

// Handler wraps next, the functions' HTTP handler, so that each request is
// one invocation span, invoke_agent, whose children are the model calls,
// tool runs and store requests of its turn (a sub-agent's model calls and
// tool runs are under its delegation's; see TraceTools). On Lambda the span continues
// the invocation's X-Ray trace: its trace id is the X-Ray trace's, and when
// X-Ray samples the invocation its parent is the function's segment, so a
// collector that exports to X-Ray shows it under the function. (Unsampled,
// that segment is never recorded, and the span is a root.) The request's
// context carries the trace id even with tracing off, for the log lines.
// The spans are sent before Handler returns, within FlushTimeout and before
// the invocation's deadline.
func (t *Tracing) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		sc, ok := xrayContext(ctx)
		switch {
		case !ok:
		case !t.On() || sc.IsSampled():
			ctx = trace.ContextWithRemoteSpanContext(ctx, sc)
		default:
			// X-Ray records no segment to be the parent: the invocation's
			// span is a root, with the X-Ray trace's id (xrayIDs).
			ctx = context.WithValue(ctx, xrayTraceKey{}, sc.TraceID())
		}
		if !t.On() {
			next.ServeHTTP(w, r.WithContext(ctx))
			return
		}
		ctx, span := t.tracer.Start(ctx, "invoke_agent "+t.cfg.ServiceName, trace.WithSpanKind(trace.SpanKindInternal))
		next.ServeHTTP(w, r.WithContext(ctx))
		span.End()
		t.flush(ctx)
	})
}

// flush sends the invocation's spans, within FlushTimeout and before the
// invocation's deadline.
func (t *Tracing) flush(ctx context.Context) {
	ctx, cancel := flushContext(ctx, cmp.Or(t.cfg.FlushTimeout, DefaultFlushTimeout))
	defer cancel()
	if err := t.provider.ForceFlush(ctx); err != nil {
		t.logger.LogAttrs(ctx, slog.LevelWarn, "traces not exported", slog.String("error", err.Error()))
	}
}

// flushMargin is the time a flush leaves before the invocation's deadline,
// for the answer to go out.
const flushMargin = 100 * time.Millisecond

// flushContext is the context of an invocation's flush: timeout long, and
// ending flushMargin before ctx's deadline. It outlives ctx's
// cancellation: a client that left does not stop the spans.
func flushContext(ctx context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	end := time.Now().Add(timeout)
	if d, ok := ctx.Deadline(); ok && d.Add(-flushMargin).Before(end) {
		end = d.Add(-flushMargin)
	}
	return context.WithDeadline(context.WithoutCancel(ctx), end)
}

// Record describes the request r on its invocation span: the route, the
// status, the session, the turn's usage, and the error code of a failure.
// Requests that ran no turn are named after their route.
func (t *Tracing) Record(ctx context.Context, r Request) {
	span := trace.SpanFromContext(ctx)
	if !t.On() || !span.IsRecording() {
		return
	}
	attrs := []attribute.KeyValue{
		attribute.String("http.request.method", r.Method),
		attribute.Int("http.response.status_code", r.Status),
	}
	if r.Route != "" {
		attrs = append(attrs, attribute.String("http.route", r.Route))
	}
	if r.SessionID != "" {
		attrs = append(attrs, attribute.String("gen_ai.conversation.id", r.SessionID))
	}
	if r.Turn {
		attrs = append(attrs,
			attribute.String("gen_ai.operation.name", "invoke_agent"),
			attribute.String("gen_ai.provider.name", providerName),
			attribute.String("gen_ai.agent.name", t.cfg.ServiceName),
		)
	} else {
		// No turn: a session route or a direct tool call, or, as HTTP's
		// conventions name a request that matched no route, its method.
		span.SetName(cmp.Or(r.Route, r.Method))
	}
	if res := r.Result; res != nil {
		attrs = append(attrs, usageAttrs(res.Usage)...)
		if res.StopReason != "" {
			attrs = append(attrs, attribute.StringSlice("gen_ai.response.finish_reasons", []string{string(res.StopReason)}))
		}
	}
	if r.Replayed {
		attrs = append(attrs, attribute.Bool("lambda_agent.replayed", true))
	}
	if r.Code != "" && r.Code != "ok" {
		attrs = append(attrs, attribute.String("error.type", r.Code))
		span.SetStatus(codes.Error, r.Code)
	}
	span.SetAttributes(attrs...)
}

// providerName is gen_ai.provider.name's value for Bedrock.
const providerName = "aws.bedrock"

// xrayContext returns the span context of the X-Ray trace header Lambda
// gives an invocation (Root=1-5759e988-bd862e3fe1be46a994272793;Parent=53995c3f42cd8ad8;Sampled=1),
// remote, and sampled as the header says.
func xrayContext(ctx context.Context) (trace.SpanContext, bool) {
	header, _ := ctx.Value("x-amzn-trace-id").(string) // aws-lambda-go's key
	var root, parent string
	var flags trace.TraceFlags
	for part := range strings.SplitSeq(header, ";") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "Root":
			root = v
		case "Parent":
			parent = v
		case "Sampled":
			if v == "1" {
				flags = trace.FlagsSampled
			}
		}
	}
	// Root is 1-{8 hex digits of time}-{24 hex digits}.
	if len(root) != 35 || root[:2] != "1-" || root[10] != '-' {
		return trace.SpanContext{}, false
	}
	tid, err := trace.TraceIDFromHex(root[2:10] + root[11:])
	if err != nil {
		return trace.SpanContext{}, false
	}
	sid, err := trace.SpanIDFromHex(parent)
	if err != nil {
		return trace.SpanContext{}, false
	}
	return trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: flags, Remote: true}), true
}

// xrayTraceKey keys the X-Ray trace id that an invocation's root span
// takes.
type xrayTraceKey struct{}

// xrayIDs makes random ids, but for a root span in an X-Ray trace, which
// keeps the trace's id, so that its spans and log lines share one.
type xrayIDs struct{}

var _ sdktrace.IDGenerator = xrayIDs{}

func (xrayIDs) NewIDs(ctx context.Context) (trace.TraceID, trace.SpanID) {
	tid, ok := ctx.Value(xrayTraceKey{}).(trace.TraceID)
	for !ok || !tid.IsValid() {
		binary.BigEndian.PutUint64(tid[:8], rand.Uint64())
		binary.BigEndian.PutUint64(tid[8:], rand.Uint64())
		ok = true
	}
	return tid, newSpanID()
}

func (xrayIDs) NewSpanID(context.Context, trace.TraceID) trace.SpanID { return newSpanID() }

func newSpanID() trace.SpanID {
	var sid trace.SpanID
	for !sid.IsValid() {
		binary.BigEndian.PutUint64(sid[:], rand.Uint64())
	}
	return sid
}

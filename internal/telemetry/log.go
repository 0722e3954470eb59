package telemetry

import (
	"context"
	"io"
	"log/slog"
	"strings"

	"github.com/aws/aws-lambda-go/lambdacontext"
	"go.opentelemetry.io/otel/trace"
)

// NewLogHandler returns the functions' log handler, configured as Lambda
// configures a function's logs: JSON when AWS_LAMBDA_LOG_FORMAT is JSON,
// else text, and at the level AWS_LAMBDA_LOG_LEVEL names (LogLevel). Each
// line carries the invocation's request id and the trace id (TraceID), so
// that a line leads to its trace and a trace to its lines.
func NewLogHandler(w io.Writer, getenv func(string) string) slog.Handler {
	opts := &slog.HandlerOptions{Level: LogLevel(getenv("AWS_LAMBDA_LOG_LEVEL")), ReplaceAttr: replaceAttr}
	if getenv("AWS_LAMBDA_LOG_FORMAT") == "JSON" {
		return WithTraceID(slog.NewJSONHandler(w, opts))
	}
	return WithTraceID(slog.NewTextHandler(w, opts))
}

// LogLevel is the slog level of one of Lambda's log levels: TRACE, DEBUG,
// INFO, WARN, ERROR or FATAL, in any case. Anything else is INFO, Lambda's
// default.
func LogLevel(name string) slog.Level {
	switch strings.ToUpper(name) {
	case "TRACE":
		return slog.LevelDebug - 4
	case "DEBUG":
		return slog.LevelDebug
	case "WARN":
		return slog.LevelWarn
	case "ERROR":
		return slog.LevelError
	case "FATAL":
		return slog.LevelError + 4
	default:
		return slog.LevelInfo
	}
}

// replaceAttr names the keys as Lambda's JSON logs do, and the levels
// beyond slog's as Lambda's: TRACE and FATAL.
func replaceAttr(groups []string, a slog.Attr) slog.Attr {
	if len(groups) == 0 && a.Key == slog.LevelKey {
		switch level, _ := a.Value.Any().(slog.Level); {
		case level < slog.LevelDebug:
			a.Value = slog.StringValue("TRACE")
		case level > slog.LevelError:
			a.Value = slog.StringValue("FATAL")
		}
	}
	return lambdacontext.ReplaceAttr(groups, a)
}

// MetricsDropped says whether Lambda's log-level filtering, as getenv
// describes it, drops the metrics lines: they carry no level, which Lambda
// takes for INFO, and it filters JSON logs below the level it was given.
func MetricsDropped(getenv func(string) string) bool {
	return getenv("AWS_LAMBDA_LOG_FORMAT") == "JSON" && LogLevel(getenv("AWS_LAMBDA_LOG_LEVEL")) > slog.LevelInfo
}

// WithTraceID wraps h so that each record logged with a context adds the
// Lambda request id and the trace id the context carries. A handler it
// wrapped already is returned as it is.
func WithTraceID(h slog.Handler) slog.Handler {
	if _, ok := h.(*logHandler); ok {
		return h
	}
	return &logHandler{h}
}

type logHandler struct{ slog.Handler }

func (h *logHandler) Handle(ctx context.Context, r slog.Record) error {
	if lc, ok := lambdacontext.FromContext(ctx); ok {
		r.AddAttrs(slog.String("requestId", lc.AwsRequestID))
	}
	if id := TraceID(ctx); id != "" {
		r.AddAttrs(slog.String("trace_id", id))
	}
	return h.Handler.Handle(ctx, r)
}

func (h *logHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return &logHandler{h.Handler.WithAttrs(attrs)}
}

func (h *logHandler) WithGroup(name string) slog.Handler {
	return &logHandler{h.Handler.WithGroup(name)}
}

// TraceID returns the id of the trace ctx belongs to, in the W3C form of
// 32 hex digits, or "" for none. On Lambda every invocation has one, the
// X-Ray trace's (see Tracing.Handler), traced or not: 1-5759e988-bd862e3fe1be46a994272793
// is 5759e988bd862e3fe1be46a994272793.
func TraceID(ctx context.Context) string {
	if sc := trace.SpanContextFromContext(ctx); sc.HasTraceID() {
		return sc.TraceID().String()
	}
	return ""
}

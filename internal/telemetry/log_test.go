package telemetry_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/google/go-cmp/cmp"
	"github.com/lambda-agent/lambda-agent/internal/telemetry"
	"go.opentelemetry.io/otel/trace"
)

// TestLogLevelIsLambdas checks that AWS_LAMBDA_LOG_LEVEL decides which
// lines are written, for each of Lambda's levels.
func TestLogLevelIsLambdas(t *testing.T) {
	tests := []struct {
		level string
		want  []string
	}{
		{"", []string{"info", "warn", "error"}},
		{"TRACE", []string{"debug", "info", "warn", "error"}},
		{"DEBUG", []string{"debug", "info", "warn", "error"}},
		{"info", []string{"info", "warn", "error"}},
		{"WARN", []string{"warn", "error"}},
		{"ERROR", []string{"error"}},
		{"FATAL", nil},
	}
	for _, tt := range tests {
		t.Run(tt.level, func(t *testing.T) {
			var out bytes.Buffer
			env := map[string]string{"AWS_LAMBDA_LOG_LEVEL": tt.level, "AWS_LAMBDA_LOG_FORMAT": "JSON"}
			logger := slog.New(telemetry.NewLogHandler(&out, func(k string) string { return env[k] }))
			logger.Debug("debug")
			logger.Info("info")
			logger.Warn("warn")
			logger.Error("error")
			var got []string
			for line := range strings.Lines(out.String()) {
				var rec map[string]any
				if err := json.Unmarshal([]byte(line), &rec); err != nil {
					t.Fatalf("not JSON: %q", line)
				}
				got = append(got, rec["message"].(string))
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("lines written (-want +got):\n%s", diff)
			}
		})
	}
}

// TestLogLinesNameTheirRequestAndTrace checks that a line logged with an
// invocation's context carries its request id and trace id, in JSON and
// in text, and that one without carries neither.
func TestLogLinesNameTheirRequestAndTrace(t *testing.T) {
	tid, _ := trace.TraceIDFromHex("5759e988bd862e3fe1be46a994272793")
	sid, _ := trace.SpanIDFromHex("53995c3f42cd8ad8")
	ctx := lambdacontext.NewContext(t.Context(), &lambdacontext.LambdaContext{AwsRequestID: "req-1"})
	ctx = trace.ContextWithRemoteSpanContext(ctx, trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid}))

	var out bytes.Buffer
	env := map[string]string{"AWS_LAMBDA_LOG_FORMAT": "JSON"}
	logger := slog.New(telemetry.NewLogHandler(&out, func(k string) string { return env[k] })).With("fn", "chat")
	logger.InfoContext(ctx, "request", "status", 200)
	logger.InfoContext(context.Background(), "init")
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	var first, second map[string]any
	if err := json.Unmarshal([]byte(lines[0]), &first); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(lines[1]), &second); err != nil {
		t.Fatal(err)
	}
	if first["requestId"] != "req-1" || first["trace_id"] != tid.String() || first["fn"] != "chat" || first["message"] != "request" {
		t.Errorf("the request's line: %v", first)
	}
	if _, ok := second["trace_id"]; ok {
		t.Errorf("a line without a trace has a trace id: %v", second)
	}

	out.Reset()
	text := slog.New(telemetry.NewLogHandler(&out, func(string) string { return "" }))
	text.InfoContext(ctx, "request")
	if got := out.String(); !strings.Contains(got, "trace_id="+tid.String()) || !strings.Contains(got, "requestId=req-1") || strings.HasPrefix(got, "{") {
		t.Errorf("text line: %q", got)
	}
}

// TestLogLinesNameLambdasLevels checks the levels beyond slog's: Lambda
// reads TRACE and FATAL, and takes any other name for INFO. It also checks
// that a handler wrapped twice adds its ids once.
func TestLogLinesNameLambdasLevels(t *testing.T) {
	var out bytes.Buffer
	env := map[string]string{"AWS_LAMBDA_LOG_LEVEL": "TRACE", "AWS_LAMBDA_LOG_FORMAT": "JSON"}
	h := telemetry.WithTraceID(telemetry.NewLogHandler(&out, func(k string) string { return env[k] }))
	logger := slog.New(h)
	ctx := lambdacontext.NewContext(t.Context(), &lambdacontext.LambdaContext{AwsRequestID: "req-1"})
	logger.Log(ctx, slog.LevelDebug-4, "trace")
	logger.Log(ctx, slog.LevelError+4, "fatal")
	var got []string
	for line := range strings.Lines(out.String()) {
		var rec map[string]any
		if err := json.Unmarshal([]byte(line), &rec); err != nil {
			t.Fatal(err)
		}
		got = append(got, rec["level"].(string))
		if n := strings.Count(line, `"requestId"`); n != 1 {
			t.Errorf("requestId %d times: %s", n, line)
		}
	}
	if diff := cmp.Diff([]string{"TRACE", "FATAL"}, got); diff != "" {
		t.Errorf("levels (-want +got):\n%s", diff)
	}
}

// TestMetricsDroppedAboveInfo checks when Lambda's log-level filtering
// drops the metrics lines, which have no level and count as INFO: only
// with JSON logs, at WARN and above.
func TestMetricsDroppedAboveInfo(t *testing.T) {
	for _, tt := range []struct {
		format, level string
		want          bool
	}{
		{"JSON", "", false}, {"JSON", "TRACE", false}, {"JSON", "INFO", false},
		{"JSON", "WARN", true}, {"JSON", "ERROR", true}, {"JSON", "FATAL", true},
		{"", "WARN", false}, // text logs are not filtered
	} {
		env := map[string]string{"AWS_LAMBDA_LOG_FORMAT": tt.format, "AWS_LAMBDA_LOG_LEVEL": tt.level}
		if got := telemetry.MetricsDropped(func(k string) string { return env[k] }); got != tt.want {
			t.Errorf("%s at %q: %v, want %v", tt.format, tt.level, got, tt.want)
		}
	}
}

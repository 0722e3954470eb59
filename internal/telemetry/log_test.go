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

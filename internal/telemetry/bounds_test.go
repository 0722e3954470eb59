package telemetry

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// TestFlushEndsBeforeTheDeadline checks the bounds of an invocation's
// flush: its timeout, or the invocation's deadline less the margin the
// answer needs, whichever comes first; and it outlives a cancelled request.
func TestFlushEndsBeforeTheDeadline(t *testing.T) {
	now := time.Now()
	near, cancelNear := context.WithDeadline(t.Context(), now.Add(300*time.Millisecond))
	defer cancelNear()
	far, cancelFar := context.WithDeadline(t.Context(), now.Add(time.Minute))
	defer cancelFar()
	gone, cancelGone := context.WithCancel(t.Context())
	cancelGone()
	tests := []struct {
		name string
		ctx  context.Context
		want time.Time // the flush's deadline, within the test's own time
	}{
		{"deadline near", near, now.Add(300*time.Millisecond - flushMargin)},
		{"deadline far", far, now.Add(time.Second)},
		{"no deadline", t.Context(), now.Add(time.Second)},
		{"request cancelled", gone, now.Add(time.Second)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := flushContext(tt.ctx, time.Second)
			defer cancel()
			got, ok := ctx.Deadline()
			if !ok || got.Before(tt.want) || got.After(tt.want.Add(time.Since(now))) {
				t.Errorf("deadline %v after the start, want %v", got.Sub(now), tt.want.Sub(now))
			}
			if ctx.Err() != nil {
				t.Errorf("the flush's context ended already: %v", ctx.Err())
			}
		})
	}
}

// TestExportErrorsHideTheQuery checks that an export's error, which the log
// receives, does not quote the endpoint's query, where some backends take
// a key.
func TestExportErrorsHideTheQuery(t *testing.T) {
	refusing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusUnauthorized) }))
	defer refusing.Close()
	down := httptest.NewServer(http.NotFoundHandler())
	down.Close()
	for name, base := range map[string]string{"refused": refusing.URL, "down": down.URL} {
		t.Run(name, func(t *testing.T) {
			rec := tracetest.NewSpanRecorder()
			_, span := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)).Tracer("t").Start(t.Context(), "s")
			span.End()
			err := (&exporter{url: base + "/v1/traces?api_key=s3cr3t", client: &http.Client{}}).ExportSpans(t.Context(), rec.Ended())
			if err == nil {
				t.Fatal("no error")
			}
			if strings.Contains(err.Error(), "s3cr3t") || !strings.Contains(err.Error(), base+"/v1/traces") {
				t.Errorf("error %q", err)
			}
		})
	}
}

// TestHeadersErrorsQuoteNoValue checks that a malformed
// OTEL_EXPORTER_OTLP_HEADERS, which holds credentials, fails init with an
// error that names no value.
func TestHeadersErrorsQuoteNoValue(t *testing.T) {
	for _, v := range []string{"Authorization: Bearer s3cr3t", "a=1,Bearer s3cr3t", "x=%zzs3cr3t"} {
		env := map[string]string{"OTEL_EXPORTER_OTLP_HEADERS": v}
		_, err := TracingConfigFromEnv(func(k string) string { return env[k] })
		if err == nil || strings.Contains(err.Error(), "s3cr3t") {
			t.Errorf("%q: error %v", v, err)
		}
	}
}

// TestServiceName checks where the service's name comes from.
func TestServiceName(t *testing.T) {
	tests := []struct {
		env  map[string]string
		want string
	}{
		{map[string]string{}, "lambda-agent"},
		{map[string]string{"AWS_LAMBDA_FUNCTION_NAME": "fn"}, "fn"},
		{map[string]string{"AWS_LAMBDA_FUNCTION_NAME": "fn", "OTEL_RESOURCE_ATTRIBUTES": "service.name=agents,team=x"}, "agents"},
		{map[string]string{"OTEL_SERVICE_NAME": "svc", "OTEL_RESOURCE_ATTRIBUTES": "service.name=agents"}, "svc"},
	}
	for _, tt := range tests {
		c, err := TracingConfigFromEnv(func(k string) string { return tt.env[k] })
		if err != nil || c.ServiceName != tt.want {
			t.Errorf("%v: service %q (%v), want %q", tt.env, c.ServiceName, err, tt.want)
		}
	}
}

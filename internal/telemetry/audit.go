package telemetry

import (
	"bytes"
	"context"
	"time"

	"github.com/aws/aws-lambda-go/lambdacontext"
)

// AuditWrite is what became of one turn's audit records.
type AuditWrite struct {
	SessionID      string
	Records, Bytes int
	Duration       time.Duration
	// Failed says the records were not all stored.
	Failed bool
}

// RecordAudit writes the line of a turn's audit write: AuditRecords,
// AuditBytes, AuditWriteFailures and AuditWriteDuration, by function and
// model. A nil Metrics, or one without Out, records nothing.
func (m *Metrics) RecordAudit(ctx context.Context, w AuditWrite) {
	if m == nil || m.Out == nil {
		return
	}
	props := map[string]any{"session_id": w.SessionID}
	if id := TraceID(ctx); id != "" {
		props["trace_id"] = id
	}
	if lc, ok := lambdacontext.FromContext(ctx); ok {
		props["requestId"] = lc.AwsRequestID
	}
	metrics := []metric{
		count("AuditRecords", w.Records),
		{"AuditBytes", "Bytes", []float64{float64(w.Bytes)}},
		count("AuditWriteFailures", b2i(w.Failed)),
		millis("AuditWriteDuration", w.Duration),
	}
	var buf bytes.Buffer
	m.encode(&buf, m.now(), props, []dimensionSet{{names: []string{dimFunction, dimModel}, metrics: metrics}})
	m.mu.Lock()
	defer m.mu.Unlock()
	_, _ = m.Out.Write(buf.Bytes())
}

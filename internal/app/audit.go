package app

import (
	"context"
	"log/slog"
	"time"

	"github.com/lambda-agent/lambda-agent/internal/ddbhistory"
	"github.com/lambda-agent/lambda-agent/internal/telemetry"
	"github.com/lambda-agent/lambda-agent/internal/turn"
)

// AuditConfig is the audit record's configuration ([Audit record]
// docs/audit.md): every model call of every turn, as sent and as answered.
type AuditConfig struct {
	// Enabled is AUDIT, on or off (the default).
	Enabled bool
	// TTLDays is AUDIT_TTL_DAYS, default DefaultAuditTTLDays: how long a
	// record is kept.
	TTLDays int
}

// DefaultAuditTTLDays is AUDIT_TTL_DAYS's default.
const DefaultAuditTTLDays = 30

// auditConfig reads AUDIT and AUDIT_TTL_DAYS.
func auditConfig(p *parser) AuditConfig {
	return AuditConfig{
		Enabled: p.choice("AUDIT", "off", "on", "off") == "on",
		TTLDays: p.integer("AUDIT_TTL_DAYS", DefaultAuditTTLDays, 1, 36_500),
	}
}

// auditOptions turns the audit record on when cfg asks for it: its records
// go to store, and a write that fails is logged and counted, never the
// turn's failure.
func auditOptions(cfg *Config, store *ddbhistory.Store, opts Options) []turn.Option {
	if !cfg.Audit.Enabled {
		return nil
	}
	metrics := &telemetry.Metrics{Namespace: cfg.MetricsNamespace, Function: cfg.FunctionName, Model: cfg.ModelID, Out: opts.Metrics}
	logger := opts.Logger
	return []turn.Option{turn.WithAudit(turn.AuditConfig{
		Store: store,
		TTL:   time.Duration(cfg.Audit.TTLDays) * 24 * time.Hour,
		Written: func(ctx context.Context, w turn.AuditWrite) {
			metrics.RecordAudit(ctx, telemetry.AuditWrite{SessionID: w.SessionID, Records: w.Records, Bytes: w.Bytes, Duration: w.Duration, Failed: w.Err != nil})
			if w.Err != nil {
				logger.LogAttrs(ctx, slog.LevelWarn, "audit record not stored",
					slog.String("session_id", w.SessionID), slog.Int("records", w.Records), slog.String("error", w.Err.Error()))
			}
		},
	})}
}

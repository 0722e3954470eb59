package telemetry

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// exporter sends spans to an OTLP/HTTP endpoint in the protobuf encoding,
// which every OTLP receiver must accept. It is safe for concurrent use.
type exporter struct {
	url     string
	headers map[string]string
	gzip    bool
	client  *http.Client
}

var _ sdktrace.SpanExporter = (*exporter)(nil)

// maxErrorBody bounds what is read of a refusal, to quote it.
const maxErrorBody = 512

// ExportSpans posts spans as one ExportTraceServiceRequest. It makes one
// attempt: on Lambda the flush that calls it has a short deadline, and a
// retry would take the time of the answer.
func (e *exporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	if len(spans) == 0 {
		return nil
	}
	body := encodeRequest(spans)
	if e.gzip {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		_, _ = zw.Write(body) // writes to a bytes.Buffer do not fail
		_ = zw.Close()
		body = buf.Bytes()
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.url, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("telemetry: export %d spans: %w", len(spans), err)
	}
	for k, v := range e.headers {
		req.Header.Set(k, v)
	}
	req.Header.Set("Content-Type", "application/x-protobuf")
	// A sandbox thawed after a while may find its kept connection gone;
	// with this header Go's transport may send the request again on a new
	// one, rather than lose the export.
	req.Header.Set("Idempotency-Key", newSpanID().String())
	if e.gzip {
		req.Header.Set("Content-Encoding", "gzip")
	}
	resp, err := e.client.Do(req)
	if err != nil {
		return fmt.Errorf("telemetry: export %d spans: %w", len(spans), redact(err))
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("telemetry: export %d spans: %s: %s: %q", len(spans), withoutQuery(e.url), resp.Status, msg)
	}
	return nil
}

// withoutQuery is rawURL without its query, where some backends take a
// key, for an error message.
func withoutQuery(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "the OTLP endpoint"
	}
	u.RawQuery, u.User = "", nil
	return u.String()
}

// redact takes the URL's query out of a transport error, which quotes it.
func redact(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return &url.Error{Op: ue.Op, URL: withoutQuery(ue.URL), Err: ue.Err}
	}
	return err
}

// Shutdown implements sdktrace.SpanExporter; there is nothing to release.
func (e *exporter) Shutdown(context.Context) error { return nil }

// The protobuf wire types.
const (
	wireVarint = 0
	wireI64    = 1
	wireLen    = 2
	wireI32    = 5
)

// pb appends protobuf fields to a buffer. Field numbers are those of
// opentelemetry-proto's trace/v1, common/v1 and resource/v1 messages;
// TestExportDecodesWithTheOfficialTypes decodes what it writes with the
// official generated types.
type pb []byte

func (b pb) tag(field, wire int) pb { return binary.AppendUvarint(b, uint64(field)<<3|uint64(wire)) }

func (b pb) bytes(field int, v []byte) pb {
	b = b.tag(field, wireLen)
	b = binary.AppendUvarint(b, uint64(len(v)))
	return append(b, v...)
}

func (b pb) str(field int, s string) pb {
	if s == "" {
		return b
	}
	b = b.tag(field, wireLen)
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func (b pb) varint(field int, v uint64) pb {
	if v == 0 {
		return b
	}
	return binary.AppendUvarint(b.tag(field, wireVarint), v)
}

func (b pb) fixed64(field int, v uint64) pb {
	return binary.LittleEndian.AppendUint64(b.tag(field, wireI64), v)
}

func (b pb) fixed32(field int, v uint32) pb {
	return binary.LittleEndian.AppendUint32(b.tag(field, wireI32), v)
}

// msg appends a nested message, which fill writes.
func (b pb) msg(field int, fill func(pb) pb) pb { return b.bytes(field, fill(nil)) }

// encodeRequest encodes an ExportTraceServiceRequest of spans, grouped by
// resource and by instrumentation scope.
func encodeRequest(spans []sdktrace.ReadOnlySpan) []byte {
	type scopeKey struct{ name, version string }
	var b pb
	for len(spans) > 0 {
		res := spans[0].Resource()
		var same, rest []sdktrace.ReadOnlySpan
		for _, s := range spans {
			if s.Resource() == res {
				same = append(same, s)
			} else {
				rest = append(rest, s)
			}
		}
		b = b.msg(1, func(rs pb) pb { // ResourceSpans
			rs = rs.msg(1, func(r pb) pb { return keyValues(r, 1, res.Attributes()) }) // Resource
			var order []scopeKey
			byScope := map[scopeKey][]sdktrace.ReadOnlySpan{}
			for _, s := range same {
				sc := s.InstrumentationScope()
				k := scopeKey{sc.Name, sc.Version}
				if _, ok := byScope[k]; !ok {
					order = append(order, k)
				}
				byScope[k] = append(byScope[k], s)
			}
			for _, k := range order {
				rs = rs.msg(2, func(ss pb) pb { // ScopeSpans
					sc := byScope[k][0].InstrumentationScope()
					ss = ss.msg(1, func(is pb) pb { return keyValues(is.str(1, k.name).str(2, k.version), 3, sc.Attributes.ToSlice()) })
					for _, s := range byScope[k] {
						ss = ss.msg(2, func(sp pb) pb { return encodeSpan(sp, s) })
					}
					return ss.str(3, byScope[k][0].InstrumentationScope().SchemaURL)
				})
			}
			return rs.str(3, res.SchemaURL())
		})
		spans = rest
	}
	return b
}

// encodeSpan appends the fields of a Span.
func encodeSpan(b pb, s sdktrace.ReadOnlySpan) pb {
	sc := s.SpanContext()
	tid, sid := sc.TraceID(), sc.SpanID()
	b = b.bytes(1, tid[:]).bytes(2, sid[:]).str(3, sc.TraceState().String())
	if p := s.Parent(); p.IsValid() {
		psid := p.SpanID()
		b = b.bytes(4, psid[:])
	}
	b = b.str(5, s.Name()).varint(6, uint64(s.SpanKind())) // OTel's kinds have OTLP's numbers
	b = b.fixed64(7, uint64(s.StartTime().UnixNano())).fixed64(8, uint64(s.EndTime().UnixNano()))
	b = keyValues(b, 9, s.Attributes()).varint(10, uint64(s.DroppedAttributes()))
	for _, e := range s.Events() {
		b = b.msg(11, func(ev pb) pb {
			ev = ev.fixed64(1, uint64(e.Time.UnixNano())).str(2, e.Name)
			return keyValues(ev, 3, e.Attributes).varint(4, uint64(e.DroppedAttributeCount))
		})
	}
	b = b.varint(12, uint64(s.DroppedEvents()))
	for _, l := range s.Links() {
		b = b.msg(13, func(m pb) pb {
			lsc := l.SpanContext
			ltid, lsid := lsc.TraceID(), lsc.SpanID()
			m = m.bytes(1, ltid[:]).bytes(2, lsid[:]).str(3, lsc.TraceState().String())
			m = keyValues(m, 4, l.Attributes).varint(5, uint64(l.DroppedAttributeCount))
			return m.fixed32(6, uint32(lsc.TraceFlags())|0x100|b2u(lsc.IsRemote())<<9)
		})
	}
	b = b.varint(14, uint64(s.DroppedLinks()))
	if st := s.Status(); st.Code != codes.Unset {
		b = b.msg(15, func(m pb) pb { return m.str(2, st.Description).varint(3, uint64(statusCode(st.Code))) })
	}
	// SPAN_FLAGS_CONTEXT_HAS_IS_REMOTE_MASK, and _IS_REMOTE_MASK when the
	// parent is remote.
	return b.fixed32(16, uint32(sc.TraceFlags())|0x100|b2u(s.Parent().IsRemote())<<9)
}

// statusCode is OTLP's number for c: OTel's Go API orders Error and Ok the
// other way round.
func statusCode(c codes.Code) int {
	switch c {
	case codes.Ok:
		return 1
	case codes.Error:
		return 2
	default:
		return 0
	}
}

// keyValues appends attrs as repeated KeyValue fields.
func keyValues(b pb, field int, attrs []attribute.KeyValue) pb {
	for _, kv := range attrs {
		b = b.msg(field, func(m pb) pb {
			return m.str(1, string(kv.Key)).msg(2, func(v pb) pb { return anyValue(v, kv.Value) })
		})
	}
	return b
}

// anyValue appends the fields of an AnyValue.
func anyValue(b pb, v attribute.Value) pb {
	switch v.Type() {
	case attribute.BOOL:
		b = b.tag(2, wireVarint)
		return binary.AppendUvarint(b, uint64(b2i(v.AsBool())))
	case attribute.INT64:
		b = b.tag(3, wireVarint)
		return binary.AppendUvarint(b, uint64(v.AsInt64()))
	case attribute.FLOAT64:
		return b.fixed64(4, math.Float64bits(v.AsFloat64()))
	case attribute.STRING:
		b = b.tag(1, wireLen)
		b = binary.AppendUvarint(b, uint64(len(v.AsString())))
		return append(b, v.AsString()...)
	case attribute.BOOLSLICE:
		return array(b, v.AsBoolSlice(), attribute.BoolValue)
	case attribute.INT64SLICE:
		return array(b, v.AsInt64Slice(), attribute.Int64Value)
	case attribute.FLOAT64SLICE:
		return array(b, v.AsFloat64Slice(), attribute.Float64Value)
	case attribute.STRINGSLICE:
		return array(b, v.AsStringSlice(), attribute.StringValue)
	default:
		return b // INVALID: an empty AnyValue
	}
}

// array appends an ArrayValue of vs.
func array[T any](b pb, vs []T, value func(T) attribute.Value) pb {
	return b.msg(5, func(a pb) pb {
		for _, v := range vs {
			a = a.msg(1, func(av pb) pb { return anyValue(av, value(v)) })
		}
		return a
	})
}

func b2u(b bool) uint32 { return uint32(b2i(b)) }

package telemetry

import (
	"context"
	"errors"
	"math"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/testing/protocmp"
)

// The expected values are built here, by hand, from the official types:
// nothing of the encoder under test helps to build them.

func strValue(s string) *commonpb.AnyValue {
	return &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: s}}
}

func boolValue(b bool) *commonpb.AnyValue {
	return &commonpb.AnyValue{Value: &commonpb.AnyValue_BoolValue{BoolValue: b}}
}

func intValue(i int64) *commonpb.AnyValue {
	return &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: i}}
}

func doubleValue(f float64) *commonpb.AnyValue {
	return &commonpb.AnyValue{Value: &commonpb.AnyValue_DoubleValue{DoubleValue: f}}
}

func arrayValue(vs ...*commonpb.AnyValue) *commonpb.AnyValue {
	return &commonpb.AnyValue{Value: &commonpb.AnyValue_ArrayValue{ArrayValue: &commonpb.ArrayValue{Values: vs}}}
}

func keyValue(k string, v *commonpb.AnyValue) *commonpb.KeyValue {
	return &commonpb.KeyValue{Key: k, Value: v}
}

// protoOpts compare decoded messages: protocmp's semantics, with attributes
// in any order, since OTLP gives their order no meaning.
var protoOpts = cmp.Options{
	protocmp.Transform(),
	protocmp.SortRepeated(func(a, b *commonpb.KeyValue) bool { return a.Key < b.Key }),
}

// everyType are attributes of every type OpenTelemetry's Go API has, with
// the edge values of each (empty, zero, false, negative, extremes), and
// the AnyValue each must decode to.
var everyType = []struct {
	attr attribute.KeyValue
	want *commonpb.AnyValue
}{
	{attribute.String("str", "text ü ☃"), strValue("text ü ☃")},
	{attribute.String("str.empty", ""), strValue("")},
	{attribute.Bool("bool.true", true), boolValue(true)},
	{attribute.Bool("bool.false", false), boolValue(false)},
	{attribute.Int64("int.negative", -42), intValue(-42)},
	{attribute.Int64("int.zero", 0), intValue(0)},
	{attribute.Int64("int.max", math.MaxInt64), intValue(math.MaxInt64)},
	{attribute.Int64("int.min", math.MinInt64), intValue(math.MinInt64)},
	{attribute.Float64("double", 2.5), doubleValue(2.5)},
	{attribute.Float64("double.negative", -1e300), doubleValue(-1e300)},
	{attribute.Float64("double.zero", 0), doubleValue(0)},
	{attribute.StringSlice("str.slice", []string{"a", "", "ü"}), arrayValue(strValue("a"), strValue(""), strValue("ü"))},
	{attribute.StringSlice("str.slice.empty", []string{}), arrayValue()},
	{attribute.BoolSlice("bool.slice", []bool{true, false}), arrayValue(boolValue(true), boolValue(false))},
	{attribute.Int64Slice("int.slice", []int64{1, 0, -1, math.MinInt64}), arrayValue(intValue(1), intValue(0), intValue(-1), intValue(math.MinInt64))},
	{attribute.Float64Slice("double.slice", []float64{0.5, 0, -0.125}), arrayValue(doubleValue(0.5), doubleValue(0), doubleValue(-0.125))},
}

// TestExportDecodesWithTheOfficialTypes is what stands behind writing
// OTLP's protobuf encoding by hand: spans made by the real SDK and sent by
// our exporter decode, with opentelemetry-proto's generated types, to
// exactly the spans the SDK made, field by field. It covers every
// attribute type, events, both statuses (whose numbers differ between the
// Go API and OTLP), a remote parent and its trace state, every span kind,
// and the resource and scope.
func TestExportDecodesWithTheOfficialTypes(t *testing.T) {
	c := StartCollector(t, CollectorOptions{})
	exp := &exporter{url: c.TracesURL(), client: &http.Client{}}
	res := resource.NewWithAttributes("https://opentelemetry.io/schemas/1.30.0",
		attribute.String("service.name", "checkout"),
		attribute.Int64("service.instance.number", 7),
		attribute.StringSlice("host.ip", []string{"10.0.0.1", "fe80::1"}),
	)
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithResource(res))
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	tracer := tp.Tracer("example.com/checkout", trace.WithInstrumentationVersion("v1.2.3"), trace.WithSchemaURL("https://opentelemetry.io/schemas/1.38.0"),
		trace.WithInstrumentationAttributes(attribute.String("library.flavour", "plain")))

	remoteTID, _ := trace.TraceIDFromHex("5759e988bd862e3fe1be46a994272793")
	remoteSID, _ := trace.SpanIDFromHex("53995c3f42cd8ad8")
	state, err := trace.ParseTraceState("vendor=opaque,other=x")
	if err != nil {
		t.Fatal(err)
	}
	remote := trace.NewSpanContext(trace.SpanContextConfig{TraceID: remoteTID, SpanID: remoteSID, TraceFlags: trace.FlagsSampled, TraceState: state, Remote: true})
	t0 := time.Date(2025, 6, 1, 12, 0, 0, 123456789, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

	var attrs []attribute.KeyValue
	var wantAttrs []*commonpb.KeyValue
	for _, a := range everyType {
		attrs = append(attrs, a.attr)
		wantAttrs = append(wantAttrs, keyValue(string(a.attr.Key), a.want))
	}

	// A server span under a remote parent, which fails.
	ctx, server := tracer.Start(trace.ContextWithRemoteSpanContext(t.Context(), remote), "GET /basket",
		trace.WithSpanKind(trace.SpanKindServer), trace.WithTimestamp(at(0)), trace.WithAttributes(attrs...))
	server.AddEvent("cache miss", trace.WithTimestamp(at(1)), trace.WithAttributes(attribute.String("key", "b-1"), attribute.Int("size", 42)))
	server.AddEvent("no attributes", trace.WithTimestamp(at(2)))
	// A client span under it, linked to the remote span, which succeeds:
	// Ok has no description.
	_, client := tracer.Start(ctx, "SELECT basket", trace.WithSpanKind(trace.SpanKindClient), trace.WithTimestamp(at(3)),
		trace.WithLinks(trace.Link{SpanContext: remote, Attributes: []attribute.KeyValue{attribute.String("why", "retry of")}}))
	client.SetStatus(codes.Ok, "")
	client.End(trace.WithTimestamp(at(4)))
	server.SetStatus(codes.Error, "the basket is gone")
	server.End(trace.WithTimestamp(at(5)))
	// New traces of the other kinds, with no status.
	var others []trace.Span
	for i, kind := range []trace.SpanKind{trace.SpanKindProducer, trace.SpanKindConsumer, trace.SpanKindInternal} {
		_, s := tracer.Start(t.Context(), "kind "+kind.String(), trace.WithSpanKind(kind), trace.WithTimestamp(at(10+i)))
		s.End(trace.WithTimestamp(at(20 + i)))
		others = append(others, s)
	}

	ids := func(s trace.Span) ([]byte, []byte) {
		tid, sid := s.SpanContext().TraceID(), s.SpanContext().SpanID()
		return tid[:], sid[:]
	}
	nanos := func(ms int) uint64 { return uint64(at(ms).UnixNano()) }
	serverTID, serverSID := ids(server)
	_, clientSID := ids(client)
	want := []*tracepb.Span{
		{
			TraceId: serverTID, SpanId: clientSID, ParentSpanId: serverSID, TraceState: "vendor=opaque,other=x",
			Flags: 0x101, // sampled; the parent is known to be local
			Name:  "SELECT basket", Kind: tracepb.Span_SPAN_KIND_CLIENT,
			StartTimeUnixNano: nanos(3), EndTimeUnixNano: nanos(4),
			Links: []*tracepb.Span_Link{{
				TraceId: remoteTID[:], SpanId: remoteSID[:], TraceState: "vendor=opaque,other=x",
				Attributes: []*commonpb.KeyValue{keyValue("why", strValue("retry of"))}, Flags: 0x301,
			}},
			Status: &tracepb.Status{Code: tracepb.Status_STATUS_CODE_OK},
		},
		{
			TraceId: remoteTID[:], SpanId: serverSID, ParentSpanId: remoteSID[:], TraceState: "vendor=opaque,other=x",
			Flags: 0x301, // sampled; the parent is known to be remote
			Name:  "GET /basket", Kind: tracepb.Span_SPAN_KIND_SERVER,
			StartTimeUnixNano: nanos(0), EndTimeUnixNano: nanos(5),
			Attributes: wantAttrs,
			Events: []*tracepb.Span_Event{
				{TimeUnixNano: nanos(1), Name: "cache miss", Attributes: []*commonpb.KeyValue{keyValue("key", strValue("b-1")), keyValue("size", intValue(42))}},
				{TimeUnixNano: nanos(2), Name: "no attributes"},
			},
			Status: &tracepb.Status{Code: tracepb.Status_STATUS_CODE_ERROR, Message: "the basket is gone"},
		},
	}
	for i, kind := range []tracepb.Span_SpanKind{tracepb.Span_SPAN_KIND_PRODUCER, tracepb.Span_SPAN_KIND_CONSUMER, tracepb.Span_SPAN_KIND_INTERNAL} {
		tid, sid := ids(others[i])
		want = append(want, &tracepb.Span{
			TraceId: tid, SpanId: sid, Flags: 0x101, Name: []string{"kind producer", "kind consumer", "kind internal"}[i], Kind: kind,
			StartTimeUnixNano: nanos(10 + i), EndTimeUnixNano: nanos(20 + i),
		})
	}

	got := c.Spans()
	var gotSpans []*tracepb.Span
	for _, s := range got {
		gotSpans = append(gotSpans, s.Span)
	}
	if diff := cmp.Diff(want, gotSpans, protoOpts); diff != "" {
		t.Errorf("spans (-want +got):\n%s", diff)
	}
	wantResource := &resourcepb.Resource{Attributes: []*commonpb.KeyValue{
		keyValue("service.name", strValue("checkout")),
		keyValue("service.instance.number", intValue(7)),
		keyValue("host.ip", arrayValue(strValue("10.0.0.1"), strValue("fe80::1"))),
	}}
	wantScope := &commonpb.InstrumentationScope{Name: "example.com/checkout", Version: "v1.2.3",
		Attributes: []*commonpb.KeyValue{keyValue("library.flavour", strValue("plain"))}}
	for _, s := range got {
		if diff := cmp.Diff(wantResource, s.Resource, protoOpts); diff != "" {
			t.Errorf("span %q: resource (-want +got):\n%s", s.Name, diff)
		}
		if s.ResourceSchemaURL != "https://opentelemetry.io/schemas/1.30.0" {
			t.Errorf("span %q: resource schema URL %q", s.Name, s.ResourceSchemaURL)
		}
		if diff := cmp.Diff(wantScope, s.Scope, protoOpts); diff != "" {
			t.Errorf("span %q: scope (-want +got):\n%s", s.Name, diff)
		}
		if s.ScopeSchemaURL != "https://opentelemetry.io/schemas/1.38.0" {
			t.Errorf("span %q: scope schema URL %q", s.Name, s.ScopeSchemaURL)
		}
	}
}

// TestExportCountsWhatTheLimitsDropped checks the dropped counts of
// attributes and events, which tell a reader of the trace that the span
// is incomplete.
func TestExportCountsWhatTheLimitsDropped(t *testing.T) {
	c := StartCollector(t, CollectorOptions{})
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithSyncer(&exporter{url: c.TracesURL(), client: &http.Client{}}),
		sdktrace.WithRawSpanLimits(sdktrace.SpanLimits{
			AttributeValueLengthLimit:   -1,
			AttributeCountLimit:         1,
			EventCountLimit:             1,
			AttributePerEventCountLimit: 1,
			LinkCountLimit:              -1,
			AttributePerLinkCountLimit:  -1,
		}),
	)
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	_, span := tp.Tracer("limits").Start(t.Context(), "crowded", trace.WithAttributes(attribute.Int("a", 1), attribute.Int("b", 2), attribute.Int("c", 3)))
	for _, name := range []string{"first", "second", "third"} {
		span.AddEvent(name, trace.WithAttributes(attribute.Int("x", 1), attribute.Int("y", 2)))
	}
	span.End()

	spans := c.Spans()
	if len(spans) != 1 {
		t.Fatalf("%d spans received, want 1", len(spans))
	}
	got := spans[0].Span
	if len(got.Attributes) != 1 || got.DroppedAttributesCount != 2 {
		t.Errorf("%d attributes, %d dropped; want 1 and 2", len(got.Attributes), got.DroppedAttributesCount)
	}
	if len(got.Events) != 1 || got.DroppedEventsCount != 2 {
		t.Fatalf("%d events, %d dropped; want 1 and 2", len(got.Events), got.DroppedEventsCount)
	}
	if ev := got.Events[0]; len(ev.Attributes) != 1 || ev.DroppedAttributesCount != 1 {
		t.Errorf("event %q: %d attributes, %d dropped; want 1 and 1", ev.Name, len(ev.Attributes), ev.DroppedAttributesCount)
	}
}

// TestExportGroupsSpansByResourceAndScope sends one batch of spans from two
// providers (two resources), each with two tracers (two scopes): a
// collector must find each span under its own resource and scope, in one
// ResourceSpans per resource and one ScopeSpans per scope.
func TestExportGroupsSpansByResourceAndScope(t *testing.T) {
	c := StartCollector(t, CollectorOptions{})
	rec := tracetest.NewSpanRecorder()
	for _, service := range []string{"one", "two"} {
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec), sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", service))))
		for _, scope := range []string{"alpha", "beta"} {
			tracer := tp.Tracer(scope, trace.WithInstrumentationVersion(scope+"-v1"))
			for _, name := range []string{"x", "y"} {
				_, s := tracer.Start(t.Context(), service+"/"+scope+"/"+name)
				s.End()
			}
		}
	}
	if err := (&exporter{url: c.TracesURL(), client: &http.Client{}}).ExportSpans(t.Context(), rec.Ended()); err != nil {
		t.Fatal(err)
	}

	exports := c.Exports()
	if len(exports) != 1 {
		t.Fatalf("%d exports, want the batch in one", len(exports))
	}
	var got []string
	for _, rs := range exports[0].Request.ResourceSpans {
		var service string
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.Key == "service.name" {
				service = kv.GetValue().GetStringValue()
			}
		}
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				got = append(got, service+" "+ss.GetScope().GetName()+" "+ss.GetScope().GetVersion()+": "+s.Name)
			}
		}
	}
	want := []string{
		"one alpha alpha-v1: one/alpha/x", "one alpha alpha-v1: one/alpha/y",
		"one beta beta-v1: one/beta/x", "one beta beta-v1: one/beta/y",
		"two alpha alpha-v1: two/alpha/x", "two alpha alpha-v1: two/alpha/y",
		"two beta beta-v1: two/beta/x", "two beta beta-v1: two/beta/y",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("spans by resource and scope (-want +got):\n%s", diff)
	}
	if n, m := len(exports[0].Request.ResourceSpans), len(exports[0].Request.ResourceSpans[0].ScopeSpans); n != 2 || m != 2 {
		t.Errorf("%d ResourceSpans, the first with %d ScopeSpans; want 2 and 2", n, m)
	}
}

// TestExportSendsGzipAndHeaders checks the settings of an export: its
// compression, which the collector undoes, and the headers that carry a
// backend's credentials.
func TestExportSendsGzipAndHeaders(t *testing.T) {
	for _, gz := range []bool{false, true} {
		t.Run(map[bool]string{false: "plain", true: "gzip"}[gz], func(t *testing.T) {
			c := StartCollector(t, CollectorOptions{})
			headers := map[string]string{"Authorization": "Bearer s3cret", "X-Tenant": "acme"}
			tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(&exporter{url: c.TracesURL(), headers: headers, gzip: gz, client: &http.Client{}}))
			t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
			_, span := tp.Tracer("t").Start(t.Context(), "compressed?", trace.WithAttributes(attribute.String("padding", strings.Repeat("z", 4096))))
			span.End()

			exports := c.Exports()
			if len(exports) != 1 {
				t.Fatalf("%d exports, want 1", len(exports))
			}
			h := exports[0].Header
			wantEncoding := map[bool]string{false: "", true: "gzip"}[gz]
			if got := h.Get("Content-Encoding"); got != wantEncoding {
				t.Errorf("Content-Encoding %q, want %q", got, wantEncoding)
			}
			for k, v := range headers {
				if got := h.Get(k); got != v {
					t.Errorf("header %s: %q, want %q", k, got, v)
				}
			}
			if spans := c.Spans(); len(spans) != 1 || spans[0].Name != "compressed?" || len(spans[0].Attributes) != 1 || len(spans[0].Attributes[0].GetValue().GetStringValue()) != 4096 {
				t.Errorf("the span did not arrive whole: %v", spans)
			}
		})
	}
}

// TestExportRefusedNamesTheStatus checks that a collector's refusal is an
// error that says which, since it is all an operator sees of a lost trace
// (Tracing logs it).
func TestExportRefusedNamesTheStatus(t *testing.T) {
	for _, tt := range []struct {
		status int
		want   string
	}{
		{http.StatusBadRequest, "400 Bad Request"},
		{http.StatusServiceUnavailable, "503 Service Unavailable"},
	} {
		t.Run(tt.want, func(t *testing.T) {
			c := StartCollector(t, CollectorOptions{Status: tt.status})
			rec := tracetest.NewSpanRecorder()
			_, span := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)).Tracer("t").Start(t.Context(), "refused")
			span.End()
			err := (&exporter{url: c.TracesURL(), client: &http.Client{}}).ExportSpans(t.Context(), rec.Ended())
			if err == nil {
				t.Fatalf("a %d answer exported without an error", tt.status)
			}
			if !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), c.TracesURL()) {
				t.Errorf("error %q does not name the status %q and the URL", err, tt.want)
			}
			if c.Attempts() != 1 {
				t.Errorf("%d attempts, want 1: on Lambda a retry eats the flush's deadline", c.Attempts())
			}
		})
	}
}

// TestExportGivesUpWithItsContext checks that an export a collector holds
// ends when its context does: the flush at the end of an invocation
// depends on it to bound the invocation.
func TestExportGivesUpWithItsContext(t *testing.T) {
	c := StartCollector(t, CollectorOptions{Hang: true})
	rec := tracetest.NewSpanRecorder()
	_, span := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)).Tracer("t").Start(t.Context(), "held")
	span.End()
	ctx, cancel := context.WithCancel(t.Context())
	go func() {
		<-c.Arrived() // the export is at the collector, unanswered
		cancel()
	}()
	err := (&exporter{url: c.TracesURL(), client: &http.Client{}}).ExportSpans(ctx, rec.Ended())
	if !errors.Is(err, context.Canceled) {
		t.Errorf("ExportSpans = %v, want context.Canceled", err)
	}
}

// TestExportOfNothingSendsNothing: a flush with no spans costs no request.
func TestExportOfNothingSendsNothing(t *testing.T) {
	c := StartCollector(t, CollectorOptions{})
	if err := (&exporter{url: c.TracesURL(), client: &http.Client{}}).ExportSpans(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	if n := c.Attempts(); n != 0 {
		t.Errorf("%d requests for no spans", n)
	}
}

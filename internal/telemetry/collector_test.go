package telemetry

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	coltracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// Collector is an OTLP/HTTP receiver of traces for tests: an
// httptest.Server that takes POST /v1/traces in the protobuf encoding,
// gzipped or not, decodes each export with the official generated types
// (opentelemetry-proto's, not ours) and keeps it. A request that breaks the
// protocol fails the test. It lives in package telemetry, exported, so that
// the exporter's tests and the handler's (package telemetry_test) share it.
type Collector struct {
	// URL is the server's base URL: what OTEL_EXPORTER_OTLP_ENDPOINT names.
	URL string

	t       testing.TB
	opts    CollectorOptions
	stop    chan struct{} // closed when the test ends, to free held exports
	arrived chan struct{} // gets a value as each export arrives, when Hang

	mu       sync.Mutex
	attempts int
	exports  []Export
}

// CollectorOptions say how a Collector answers. The zero value accepts
// every export.
type CollectorOptions struct {
	// Status, unless 0, refuses every export with that status, and keeps
	// nothing.
	Status int
	// Hang never answers: each export is held until the exporter gives up
	// or the test ends.
	Hang bool
}

// Export is one export request the collector accepted.
type Export struct {
	Header  http.Header
	Request *coltracepb.ExportTraceServiceRequest
}

// Span is a received span with the resource and scope it came under.
type Span struct {
	*tracepb.Span
	Resource          *resourcepb.Resource
	ResourceSchemaURL string
	Scope             *commonpb.InstrumentationScope
	ScopeSchemaURL    string
}

// StartCollector starts a Collector that closes when t ends.
func StartCollector(t testing.TB, opts CollectorOptions) *Collector {
	t.Helper()
	c := &Collector{t: t, opts: opts, stop: make(chan struct{}), arrived: make(chan struct{}, 16)}
	srv := httptest.NewServer(http.HandlerFunc(c.serve))
	c.URL = srv.URL
	t.Cleanup(srv.Close)                // runs second: waits for the freed exports
	t.Cleanup(func() { close(c.stop) }) // runs first
	return c
}

// TracesURL is the URL exports go to.
func (c *Collector) TracesURL() string { return c.URL + "/v1/traces" }

// serve receives one export.
func (c *Collector) serve(w http.ResponseWriter, r *http.Request) {
	c.mu.Lock()
	c.attempts++
	c.mu.Unlock()
	if c.opts.Hang {
		select {
		case c.arrived <- struct{}{}:
		default: // nobody is counting
		}
		select {
		case <-r.Context().Done():
		case <-c.stop:
		}
		return
	}
	if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" {
		c.t.Errorf("collector: %s %s; OTLP/HTTP posts traces to /v1/traces", r.Method, r.URL.Path)
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	if ct := r.Header.Get("Content-Type"); ct != "application/x-protobuf" {
		c.t.Errorf("collector: Content-Type %q, want application/x-protobuf", ct)
		http.Error(w, "unsupported media type", http.StatusUnsupportedMediaType)
		return
	}
	var body io.Reader = r.Body
	switch enc := r.Header.Get("Content-Encoding"); enc {
	case "":
	case "gzip":
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			c.t.Errorf("collector: Content-Encoding gzip, and the body is not: %v", err)
			http.Error(w, "bad gzip", http.StatusBadRequest)
			return
		}
		body = zr
	default:
		c.t.Errorf("collector: Content-Encoding %q", enc)
		http.Error(w, "unsupported encoding", http.StatusUnsupportedMediaType)
		return
	}
	raw, err := io.ReadAll(body)
	if err != nil {
		c.t.Errorf("collector: read the export: %v", err)
		http.Error(w, "bad body", http.StatusBadRequest)
		return
	}
	req := &coltracepb.ExportTraceServiceRequest{}
	if err := proto.Unmarshal(raw, req); err != nil {
		c.t.Errorf("collector: the export does not decode as an ExportTraceServiceRequest: %v", err)
		http.Error(w, "bad protobuf", http.StatusBadRequest)
		return
	}
	if unknown := unknownFields(req); len(unknown) > 0 {
		c.t.Errorf("collector: the export holds fields opentelemetry-proto does not define, in %v", unknown)
	}
	if c.opts.Status != 0 {
		http.Error(w, "refused by the test", c.opts.Status)
		return
	}
	c.mu.Lock()
	c.exports = append(c.exports, Export{Header: r.Header.Clone(), Request: req})
	c.mu.Unlock()
	// The spans are kept before the answer leaves, so an exporter that has
	// its answer knows they are here.
	resp, _ := proto.Marshal(&coltracepb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = io.Copy(w, bytes.NewReader(resp))
}

// unknownFields names the messages of m that hold fields the official
// types do not know: a wrong field number or wire type in our encoder
// decodes without an error, into them.
func unknownFields(m proto.Message) []string {
	var names []string
	var walk func(proto.Message)
	walk = func(m proto.Message) {
		pm := m.ProtoReflect()
		if len(pm.GetUnknown()) > 0 {
			names = append(names, string(pm.Descriptor().FullName()))
		}
		fields := pm.Descriptor().Fields()
		for i := range fields.Len() {
			fd := fields.Get(i)
			if fd.Message() == nil || !pm.Has(fd) || fd.IsMap() {
				continue
			}
			if fd.IsList() {
				list := pm.Get(fd).List()
				for j := range list.Len() {
					walk(list.Get(j).Message().Interface())
				}
				continue
			}
			walk(pm.Get(fd).Message().Interface())
		}
	}
	walk(m)
	return names
}

// Attempts counts the export requests that reached the collector,
// refused, held or kept.
func (c *Collector) Attempts() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.attempts
}

// Arrived returns a channel that gets a value as each held export arrives,
// with Hang.
func (c *Collector) Arrived() <-chan struct{} { return c.arrived }

// Exports returns the exports kept so far.
func (c *Collector) Exports() []Export {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Export(nil), c.exports...)
}

// Spans returns the spans kept so far, in the order received.
func (c *Collector) Spans() []Span {
	var spans []Span
	for _, e := range c.Exports() {
		for _, rs := range e.Request.GetResourceSpans() {
			for _, ss := range rs.GetScopeSpans() {
				for _, s := range ss.GetSpans() {
					spans = append(spans, Span{
						Span:              s,
						Resource:          rs.GetResource(),
						ResourceSchemaURL: rs.GetSchemaUrl(),
						Scope:             ss.GetScope(),
						ScopeSchemaURL:    ss.GetSchemaUrl(),
					})
				}
			}
		}
	}
	return spans
}

// Reset forgets the exports kept so far, so that a test's next request
// starts from none.
func (c *Collector) Reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.exports = nil
}

package conversetest

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Server is a stand-in for Bedrock Runtime's Converse operation, listening
// on a loopback address. Its methods are safe for concurrent use.
//
// MaxInputBytes and Responder are plain fields: set them before the first
// request (typically right after [NewServer]) and do not change them while
// requests are in flight.
type Server struct {
	// URL is the base URL of the server, such as "http://127.0.0.1:51234",
	// for use as the SDK's BaseEndpoint.
	URL string

	// MaxInputBytes, if positive, is the context window: a valid request
	// whose [EstimateInputBytes] exceeds it is answered with the
	// ValidationException [OverflowMessage], as Bedrock does for a prompt
	// that is too long. Zero means unlimited.
	MaxInputBytes int

	// Responder makes the reply for a valid request when no scripted reply
	// is queued. Nil means [EchoResponder]. It is called concurrently when
	// requests arrive concurrently, without the server's lock held, so it
	// may use the Server's methods (Enqueue, Requests, …).
	Responder func(*Request) Reply

	srv       *http.Server
	client    *http.Client // shared by every SDK client from Client
	closed    chan struct{}
	closeOnce sync.Once
	requestID atomic.Uint64

	mu         sync.Mutex
	queue      []Reply
	requests   []*Request
	violations []string
	active     int           // handlers running
	idle       chan struct{} // closed when active drops to 0, if someone waits
	cache      *promptCache  // nil unless EnableCache was called
}

// NewServer starts a Server on a random loopback port. Call Close when done.
// Like httptest.NewServer, it panics if it cannot listen, which only happens
// when the machine has no loopback interface.
func NewServer() *Server {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		if ln, err = net.Listen("tcp6", "[::1]:0"); err != nil {
			panic(fmt.Sprintf("conversetest: listen on a loopback port: %v", err))
		}
	}
	s := &Server{
		URL:    "http://" + ln.Addr().String(),
		client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}},
		closed: make(chan struct{}),
	}
	s.srv = &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second}
	// Serve only returns, with ErrServerClosed, once Close was called.
	go s.srv.Serve(ln)
	return s
}

// Close stops the server: it closes the listener and every connection,
// cuts short the Delay of requests in flight, and waits for their handlers
// to return. It is safe to call more than once.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		close(s.closed)
		s.srv.Close()
		s.client.CloseIdleConnections()
	})
	s.mu.Lock()
	var idle chan struct{}
	if s.active > 0 {
		if s.idle == nil {
			s.idle = make(chan struct{})
		}
		idle = s.idle
	}
	s.mu.Unlock()
	if idle != nil {
		<-idle
	}
}

// Handler returns the server's HTTP handler, to mount it in another server.
// Requests it serves are scripted and recorded like those sent to URL.
func (s *Server) Handler() http.Handler {
	return http.HandlerFunc(s.serveHTTP)
}

// Enqueue appends scripted replies. Each valid request takes the oldest
// one; invalid requests (and context overflows found via MaxInputBytes) do
// not consume the queue.
func (s *Server) Enqueue(replies ...Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queue = append(s.queue, replies...)
}

// Pending returns the number of scripted replies not yet consumed.
func (s *Server) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.queue)
}

// Requests returns the requests received so far, valid or not, in arrival
// order. The Requests are shared with the server; do not modify them.
func (s *Server) Requests() []*Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]*Request(nil), s.requests...)
}

// Calls returns the number of requests received so far, valid or not.
func (s *Server) Calls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.requests)
}

// Violations returns the message of every request rejected for breaking
// Bedrock's rules (or for a malformed body), in arrival order. Context
// overflows and scripted errors are not violations: a test can assert that
// Violations is empty while exercising them.
func (s *Server) Violations() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.violations...)
}

// Reset forgets the queued replies, the recorded requests and the
// violations. MaxInputBytes, Responder and the simulated prompt cache
// ([Server.EnableCache]) are kept.
func (s *Server) Reset() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queue, s.requests, s.violations = nil, nil, nil
}

// operation is a Bedrock Runtime operation the server recognises.
type operation struct {
	name string // as in Request.Operation
	// serve answers a request to this operation.
	serve func(s *Server, w http.ResponseWriter, r *http.Request, modelID string, start time.Time)
}

// operations maps the last path segment of /model/{modelId}/{segment} to
// its operation.
var operations = map[string]operation{
	"converse":        {name: "Converse", serve: (*Server).serveConverse},
	"converse-stream": {name: "ConverseStream", serve: (*Server).serveConverseStream},
}

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	s.enter()
	defer s.leave()

	modelID, op, ok := route(r)
	if !ok {
		s.writeError(w, &APIError{
			Status:  http.StatusNotFound,
			Code:    CodeUnknownOperation,
			Message: fmt.Sprintf("conversetest: no operation for %s %s", r.Method, r.URL.EscapedPath()),
		})
		return
	}
	op.serve(s, w, r, modelID, start)
}

// route finds the operation and the unescaped model ID of r. The model ID
// is cut from the escaped path because an ARN's '/' arrives as %2F.
func route(r *http.Request) (modelID string, op operation, ok bool) {
	if r.Method != http.MethodPost {
		return "", operation{}, false
	}
	rest, found := strings.CutPrefix(r.URL.EscapedPath(), "/model/")
	if !found {
		return "", operation{}, false
	}
	i := strings.LastIndexByte(rest, '/')
	if i < 0 {
		return "", operation{}, false
	}
	op, ok = operations[rest[i+1:]]
	if !ok {
		return "", operation{}, false
	}
	modelID, err := url.PathUnescape(rest[:i])
	if err != nil {
		return "", operation{}, false
	}
	return modelID, op, true
}

// converseResponse is the body of a successful Converse answer.
type converseResponse struct {
	Output struct {
		Message Message `json:"message"`
	} `json:"output"`
	StopReason string `json:"stopReason"`
	Usage      Usage  `json:"usage"`
	Metrics    struct {
		LatencyMs int64 `json:"latencyMs"`
	} `json:"metrics"`
	Trace any `json:"trace,omitempty"`
}

func (s *Server) serveConverse(w http.ResponseWriter, r *http.Request, modelID string, start time.Time) {
	req, reply, ok := s.exchange(w, r, "Converse", modelID)
	if !ok {
		return
	}
	var resp converseResponse
	resp.Output.Message = Message{Role: "assistant", Content: reply.Content}
	if resp.Output.Message.Content == nil {
		resp.Output.Message.Content = []ContentBlock{}
	}
	resp.StopReason = reply.stopReason()
	resp.Usage = s.usage(req, reply)
	resp.Metrics.LatencyMs = time.Since(start).Milliseconds()
	resp.Trace = reply.trace(req)
	body, err := json.Marshal(&resp)
	if err != nil {
		s.writeError(w, &APIError{
			Status:  http.StatusInternalServerError,
			Code:    CodeInternalServer,
			Message: fmt.Sprintf("conversetest: encode scripted reply: %v", err),
		})
		return
	}
	s.writeHeader(w, http.StatusOK)
	w.Write(body) // A failed write means the client left; nobody to tell.
}

// exchange does what every model operation shares: it decodes, records and
// validates the request, checks the context window, picks the reply and
// waits out its Delay. It answers errors itself; ok reports whether the
// caller should encode reply.
func (s *Server) exchange(w http.ResponseWriter, r *http.Request, opName, modelID string) (req *Request, reply Reply, ok bool) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, Reply{}, false // The client went away.
	}
	var answer *APIError
	req = &Request{}
	if err := json.Unmarshal(body, req); err != nil {
		req = &Request{}
		answer = validationError("malformed request body: " + err.Error())
	}
	req.ModelID, req.Operation = modelID, opName
	if answer == nil {
		answer = validate(req)
	}
	req.Valid = answer == nil
	if req.Valid && s.MaxInputBytes > 0 && EstimateInputBytes(req) > s.MaxInputBytes {
		answer = validationError(OverflowMessage)
	}
	if answer != nil {
		req.Err = answer
	}

	scripted := false
	s.mu.Lock()
	s.requests = append(s.requests, req)
	if !req.Valid {
		s.violations = append(s.violations, answer.Message)
	}
	if answer == nil && len(s.queue) > 0 {
		reply, scripted = s.queue[0], true
		s.queue[0] = Reply{} // Let the content be collected.
		s.queue = s.queue[1:]
	}
	s.mu.Unlock()

	if answer != nil {
		s.writeError(w, answer)
		return nil, Reply{}, false
	}
	if !scripted {
		responder := s.Responder
		if responder == nil {
			responder = EchoResponder
		}
		reply = responder(req)
	}
	if reply.Delay > 0 {
		t := time.NewTimer(reply.Delay)
		defer t.Stop()
		select {
		case <-t.C:
		case <-r.Context().Done():
			return nil, Reply{}, false // Nobody is left to answer.
		case <-s.closed:
			// Drop the connection rather than send a half-made answer.
			panic(http.ErrAbortHandler)
		}
	}
	if reply.Err != nil {
		s.writeError(w, reply.Err)
		return nil, Reply{}, false
	}
	if e := reply.scriptError(req); e != nil {
		s.writeError(w, e)
		return nil, Reply{}, false
	}
	return req, reply, true
}

// writeHeader sets the headers every answer has and writes the status.
func (s *Server) writeHeader(w http.ResponseWriter, status int) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("X-Amzn-Requestid", s.nextRequestID())
	w.WriteHeader(status)
}

func (s *Server) nextRequestID() string {
	return fmt.Sprintf("conversetest-%d", s.requestID.Add(1))
}

// writeError answers with e in the restJson1 error format: the code in the
// X-Amzn-ErrorType header, which the SDK uses to pick the error type, and
// the message in the body.
func (s *Server) writeError(w http.ResponseWriter, e *APIError) {
	body, err := json.Marshal(struct {
		Message string `json:"message"`
	}{e.Message})
	if err != nil {
		body = []byte(`{"message":"conversetest: encode error message"}`)
	}
	w.Header().Set("X-Amzn-ErrorType", e.Code)
	s.writeHeader(w, e.Status)
	w.Write(body) // A failed write means the client left; nobody to tell.
}

func (s *Server) enter() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.active++
}

func (s *Server) leave() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.active--
	if s.active == 0 && s.idle != nil {
		close(s.idle)
		s.idle = nil
	}
}

// TB is what NewChecked needs of a test: a *testing.T or *testing.B, so
// that this package need not import package testing.
type TB interface {
	Helper()
	Cleanup(func())
	Errorf(format string, args ...any)
}

// NewChecked starts a server for the test t, and closes it when t ends,
// after failing t if the server saw a request that Bedrock would reject.
func NewChecked(t TB) *Server {
	t.Helper()
	s := NewServer()
	t.Cleanup(func() {
		if v := s.Violations(); len(v) > 0 {
			t.Errorf("requests Bedrock would reject:\n%s", strings.Join(v, "\n"))
		}
		s.Close()
	})
	return s
}

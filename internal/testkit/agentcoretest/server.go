package agentcoretest

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/bedrockagentcore"

	"github.com/lambda-agent/lambda-agent/internal/sdkhttp"
	"github.com/lambda-agent/lambda-agent/internal/testkit/awstest"
)

// MemoryID is the memory resource every new Server has.
const MemoryID = "lambdaagent-AbCdE01234"

// Server is a stand-in for the AgentCore Memory data plane on a loopback
// port. Its methods are safe for concurrent use.
type Server struct {
	// URL is the server's endpoint, such as http://127.0.0.1:41234, for the
	// SDK's BaseEndpoint or AWS_ENDPOINT_URL_BEDROCK_AGENTCORE.
	URL string

	srv    *http.Server
	client *http.Client // shared by every SDK client from Client
	hook   atomic.Pointer[Hook]

	mu       sync.Mutex
	memories map[string]*memory
	tokens   map[string]page // nextTokens handed out
	faults   []fault
	calls    map[string]int // by operation, refused or not
}

// memory is one memory resource's state.
type memory struct {
	events  []*event // in creation order
	byToken map[string]idempotent
	records []*record // in the order they were added
}

// idempotent is what a clientToken stood for.
type idempotent struct {
	request string // the canonical request without its token
	event   *event
}

type fault struct {
	op string // "" for any
	n  int
	f  Fault
}

// page is where a nextToken resumes: the operation and the request it
// belongs to, and the offset of the next item.
type page struct {
	op, request string
	offset      int
}

// NewServer starts a Server with the one memory [MemoryID] on a random
// loopback port. Call Close when done. Like httptest.NewServer, it panics
// if it cannot listen.
func NewServer() *Server {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		if ln, err = net.Listen("tcp6", "[::1]:0"); err != nil {
			panic(fmt.Sprintf("agentcoretest: listen on a loopback port: %v", err))
		}
	}
	s := &Server{
		URL:      "http://" + ln.Addr().String(),
		client:   &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}},
		memories: map[string]*memory{},
		tokens:   map[string]page{},
		calls:    map[string]int{},
	}
	s.AddMemory(MemoryID)
	s.srv = &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go s.srv.Serve(ln) // returns ErrServerClosed after Close
	return s
}

// Close stops the server and closes its connections.
func (s *Server) Close() {
	s.srv.Close()
	s.client.CloseIdleConnections()
}

// AddMemory creates an empty memory resource, as the control plane's
// CreateMemory would. It panics on an id that does not match AgentCore's
// memoryId pattern, as a test that relied on one would test nothing real.
func (s *Server) AddMemory(id string) {
	if !memoryIDPattern.MatchString(id) {
		panic(fmt.Sprintf("agentcoretest: add memory %q: not a memoryId", id))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.memories[id] == nil {
		s.memories[id] = &memory{byToken: map[string]idempotent{}}
	}
}

// FailNext makes the next n requests for op (an operation name such as
// CreateEvent, or "" for any operation) answer f instead, before the
// request is read, so that they change nothing. Faults queue in the order
// they are set.
func (s *Server) FailNext(op string, n int, f Fault) {
	f.error() // panics on an unknown fault
	s.mu.Lock()
	defer s.mu.Unlock()
	s.faults = append(s.faults, fault{op: op, n: n, f: f})
}

// Hook sees a request and its operation, such as CreateEvent, before the
// server serves it: the body is read, and r.Body reads it again. It may
// block, to hold or delay the request; a request whose client has gone
// when it returns, a killed process's for one, is dropped unserved, as
// AgentCore never sees a request that was never sent whole. A Fault other
// than 0 is answered in its place, and the request changes nothing.
type Hook func(op string, r *http.Request) Fault

// SetHook makes the server call hook with each request that passed the
// signature check and any fault of FailNext; nil removes the hook.
func (s *Server) SetHook(hook Hook) {
	if hook == nil {
		s.hook.Store(nil)
		return
	}
	s.hook.Store(&hook)
}

// Calls returns how many requests for op passed the signature check,
// refused or not.
func (s *Server) Calls(op string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.calls[op]
}

// Options returns options for a real AgentCore client that talks to s:
// BaseEndpoint is s.URL, the region is us-east-1, the credentials are static
// fakes, and retries are off so that every call is exactly one request.
// They read no environment or shared config file.
func (s *Server) Options() bedrockagentcore.Options {
	return bedrockagentcore.Options{
		HTTPClient:   sdkhttp.Wrap(s.client),
		Region:       "us-east-1",
		BaseEndpoint: aws.String(s.URL),
		Credentials:  credentials.NewStaticCredentialsProvider("AKID", "SECRET", ""),
		Retryer:      aws.NopRetryer{},
	}
}

// Client returns a real AgentCore client built from Options and then
// optFns. An HTTP client that optFns set gets the workaround of package
// sdkhttp too, as production clients do.
func (s *Server) Client(optFns ...func(*bedrockagentcore.Options)) *bedrockagentcore.Client {
	optFns = append(optFns, func(o *bedrockagentcore.Options) { o.HTTPClient = sdkhttp.Wrap(o.HTTPClient) })
	return bedrockagentcore.New(s.Options(), optFns...)
}

// handler is one operation: it reads the request and answers a value
// to encode as JSON with the given status, or a refusal.
type handler func(r *http.Request, body []byte) (status int, out any, aerr *awstest.Error)

// Handler returns the server's HTTP handler, to mount it in another server.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	route := func(pattern, op string, h handler) {
		mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) { s.serve(w, r, op, h) })
	}
	route("POST /memories/{memoryId}/events", "CreateEvent", s.createEvent)
	route("POST /memories/{memoryId}/actor/{actorId}/sessions/{sessionId}", "ListEvents", s.listEvents)
	route("DELETE /memories/{memoryId}/actor/{actorId}/sessions/{sessionId}/events/{eventId}", "DeleteEvent", s.deleteEvent)
	route("POST /memories/{memoryId}/retrieve", "RetrieveMemoryRecords", s.retrieveRecords)
	route("POST /memories/{memoryId}/memoryRecords", "ListMemoryRecords", s.listRecords)
	route("GET /memories/{memoryId}/memoryRecord/{memoryRecordId}", "GetMemoryRecord", s.getRecord)
	route("POST /memories/{memoryId}/memoryRecords/batchDelete", "BatchDeleteMemoryRecords", s.batchDeleteRecords)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Amzn-Requestid", awstest.NewRequestID())
		unknown := &awstest.Error{Status: http.StatusNotFound, Code: "UnknownOperationException",
			MessageKey: "message", Message: fmt.Sprintf("agentcoretest: no operation for %s %s", r.Method, r.URL.EscapedPath())}
		unknown.WriteRESTJSON(w)
	})
	return mux
}

// maxBody bounds what the server reads of a request; AgentCore documents
// no request size, and this is far above what the documented limits allow.
const maxBody = 16 << 20

func (s *Server) serve(w http.ResponseWriter, r *http.Request, op string, h handler) {
	w.Header().Set("X-Amzn-Requestid", awstest.NewRequestID())
	if _, aerr := awstest.SignedRegion(r, "bedrock-agentcore"); aerr != nil {
		aerr.WriteRESTJSON(w)
		return
	}
	if aerr := s.count(op); aerr != nil {
		aerr.WriteRESTJSON(w)
		return
	}
	body, err := readBody(r)
	if err != nil {
		validation("CannotParse", "agentcoretest: read the request: %v", err).WriteRESTJSON(w)
		return
	}
	if hook := s.hook.Load(); hook != nil {
		r.Body = io.NopCloser(bytes.NewReader(body))
		f := (*hook)(op, r)
		if r.Context().Err() != nil {
			return // the client went away: nothing to answer, nothing served
		}
		if f != 0 {
			f.error().WriteRESTJSON(w)
			return
		}
	}
	if aerr := validMemoryID(r.PathValue("memoryId")); aerr != nil {
		aerr.WriteRESTJSON(w)
		return
	}
	status, out, aerr := h(r, body)
	if aerr != nil {
		aerr.WriteRESTJSON(w)
		return
	}
	b, err := json.Marshal(out)
	if err != nil {
		panic(fmt.Sprintf("agentcoretest: encode an answer: %v", err)) // a bug in the stand-in
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// count counts a request for op and answers the fault due for it, if any.
func (s *Server) count(op string) *awstest.Error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls[op]++
	for i, f := range s.faults {
		if f.op != "" && f.op != op {
			continue
		}
		if f.n--; f.n <= 0 {
			s.faults = append(s.faults[:i], s.faults[i+1:]...)
		} else {
			s.faults[i] = f
		}
		return f.f.error()
	}
	return nil
}

func readBody(r *http.Request) ([]byte, error) {
	defer r.Body.Close()
	b, err := io.ReadAll(io.LimitReader(r.Body, maxBody+1))
	if err == nil && len(b) > maxBody {
		err = fmt.Errorf("the body is over %d bytes", maxBody)
	}
	return b, err
}

// memoryLocked returns the memory named by r's path, or a 404 as
// AgentCore answers for a memory that does not exist. s.mu is held.
func (s *Server) memoryLocked(r *http.Request) (*memory, *awstest.Error) {
	id := r.PathValue("memoryId")
	m := s.memories[id]
	if m == nil {
		return nil, notFound("Memory %s not found", id)
	}
	return m, nil
}

// newToken hands out a nextToken for p. s.mu is held.
func (s *Server) newToken(p page) *string {
	t := randomHex(24)
	s.tokens[t] = p
	return &t
}

// pageOf is the page of items from offset, size long, and the nextToken
// of the page after it, nil on the last: for the operation op on
// request. s.mu is held.
func pageOf[T any](s *Server, items []T, offset, size int, op, request string) ([]T, *string) {
	end := min(offset+size, len(items))
	var next *string
	if end < len(items) {
		next = s.newToken(page{op: op, request: request, offset: end})
	}
	return items[min(offset, end):end], next
}

// resume returns the offset a nextToken stands for; "" is the start. A
// token this server did not hand out for the same operation and request
// is refused. s.mu is held.
func (s *Server) resume(token *string, op, request string) (int, *awstest.Error) {
	if token == nil {
		return 0, nil
	}
	p, ok := s.tokens[*token]
	if !ok || p.op != op || p.request != request {
		return 0, invalidField("Invalid nextToken")
	}
	return p.offset, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // never fails
	return hex.EncodeToString(b)
}

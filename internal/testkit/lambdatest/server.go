package lambdatest

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/lambda"

	"github.com/lambda-agent/lambda-agent/internal/sdkhttp"
	"github.com/lambda-agent/lambda-agent/internal/testkit/awstest"
)

// Lambda's quotas, as the Invoke API reference and the SDK state them.
const (
	// MaxPayload is the largest synchronous (and DryRun) request payload.
	MaxPayload = 6 << 20 // 6291456
	// MaxEventPayload is the largest asynchronous (Event) request payload.
	MaxEventPayload = 1 << 20
	// MaxResponse is the largest output a function may return; Lambda's
	// message names 6291556 bytes, 100 more than the request limit.
	MaxResponse = 6291556
	// DefaultTimeout is Lambda's default function timeout.
	DefaultTimeout = 3 * time.Second
	// MaxTimeout is the longest timeout Lambda allows.
	MaxTimeout = 15 * time.Minute
	// AccountID is the account the functions belong to.
	AccountID = "123456789012"
)

// Function is the code of a registered function: it gets the event and
// returns the output, both JSON. An error is a function error (see
// [FunctionError]). ctx ends at the function's timeout, when the caller goes
// away, or when the server closes.
type Function func(ctx context.Context, payload []byte) ([]byte, error)

// Config is a registered function's configuration.
type Config struct {
	// Timeout bounds each invocation; zero means [DefaultTimeout]. Lambda
	// allows at most [MaxTimeout].
	Timeout time.Duration
	// ReservedConcurrency, if positive, is how many synchronous invocations
	// may run at once; one more gets 429 TooManyRequestsException.
	ReservedConcurrency int
}

func (c Config) timeout() time.Duration {
	if c.Timeout <= 0 {
		return DefaultTimeout
	}
	return c.Timeout
}

// FunctionError is an error a Function returns to choose the errorType of
// its function error payload, as a Lambda runtime reports an exception's
// type.
type FunctionError struct {
	Type    string
	Message string
}

func (e *FunctionError) Error() string { return e.Message }

// Request is an invocation request that reached a registered function.
type Request struct {
	// RequestID is the x-amzn-RequestId of the answer.
	RequestID string
	// Function is the function's name, without qualifier.
	Function string
	// Qualifier is the qualifier asked for, from the name or the Qualifier
	// parameter, or "".
	Qualifier string
	// InvocationType is RequestResponse, Event or DryRun.
	InvocationType string
	// Payload is the event, {} when the request had none.
	Payload json.RawMessage
	// ClientContext is what X-Amz-Client-Context carried, which the
	// function gets through lambdacontext.
	ClientContext lambdacontext.ClientContext
}

// Server is a stand-in for Lambda's Invoke operation on a loopback port. Its
// methods are safe for concurrent use.
type Server struct {
	// URL is the server's endpoint, such as http://127.0.0.1:41234, for the
	// SDK's BaseEndpoint or AWS_ENDPOINT_URL_LAMBDA.
	URL string

	srv    *http.Server
	client *http.Client // shared by every SDK client from Client

	closeOnce sync.Once
	closed    chan struct{}

	mu        sync.Mutex
	isClosed  bool
	running   sync.WaitGroup // function goroutines; Add only under mu while !isClosed
	functions map[key]*function
	requests  []Request
}

// key names a registration: a function name and a qualifier, "" for
// $LATEST.
type key struct{ name, qualifier string }

type function struct {
	fn       Function
	cfg      Config
	calls    int // guarded by Server.mu
	inflight int // synchronous invocations running; guarded by Server.mu
}

// NewServer starts a Server on a random loopback port. Call Close when done.
// Like httptest.NewServer, it panics if it cannot listen.
func NewServer() *Server {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		if ln, err = net.Listen("tcp6", "[::1]:0"); err != nil {
			panic(fmt.Sprintf("lambdatest: listen on a loopback port: %v", err))
		}
	}
	s := &Server{
		URL:       "http://" + ln.Addr().String(),
		client:    &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}},
		closed:    make(chan struct{}),
		functions: map[key]*function{},
	}
	s.srv = &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go s.srv.Serve(ln) // returns ErrServerClosed after Close
	return s
}

// Close stops the server: it closes the listener and the connections,
// cancels the context of every function still running, and waits for them
// to return. A function that ignores its context keeps Close waiting. It is
// safe to call more than once.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		s.mu.Lock()
		s.isClosed = true
		s.mu.Unlock()
		close(s.closed)
		s.srv.Close()
		s.client.CloseIdleConnections()
	})
	s.running.Wait()
}

// Handler returns the server's HTTP handler, to mount it in another server.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /2015-03-31/functions/{FunctionName}/invocations", s.serveInvoke)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Amzn-Requestid", awstest.NewRequestID())
		unknown := &awstest.Error{Status: http.StatusNotFound, Code: "UnknownOperationException",
			MessageKey: "message", Message: fmt.Sprintf("lambdatest: no operation for %s %s", r.Method, r.URL.EscapedPath())}
		unknown.WriteRESTJSON(w)
	})
	return mux
}

var registeredName = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}(:(\$LATEST|[a-zA-Z0-9_-]{1,128}))?$`)

// Register registers fn under name with the default [Config]. See
// [Server.RegisterWithConfig].
func (s *Server) Register(name string, fn Function) {
	s.RegisterWithConfig(name, fn, Config{})
}

// RegisterWithConfig registers fn under name, replacing any function
// registered under it. name is a function name as CreateFunction accepts it
// (letters, digits, hyphens and underscores, at most 64), optionally with
// ":qualifier" for a version or an alias; "name" and "name:$LATEST" are the
// same. It panics on a name or a timeout Lambda would refuse, as a test
// that relied on one would test nothing real.
func (s *Server) RegisterWithConfig(name string, fn Function, cfg Config) {
	if !registeredName.MatchString(name) {
		panic(fmt.Sprintf("lambdatest: register %q: not a valid function name", name))
	}
	if cfg.Timeout > MaxTimeout {
		panic(fmt.Sprintf("lambdatest: register %q: timeout %v is over Lambda's %v", name, cfg.Timeout, MaxTimeout))
	}
	k := splitKey(name)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.functions[k] = &function{fn: fn, cfg: cfg}
}

func splitKey(name string) key {
	n, q, _ := strings.Cut(name, ":")
	if q == "$LATEST" {
		q = ""
	}
	return key{n, q}
}

// Calls returns how many invocations (RequestResponse or Event, not DryRun)
// ran the function registered as name, as given to Register.
func (s *Server) Calls(name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if f := s.functions[splitKey(name)]; f != nil {
		return f.calls
	}
	return 0
}

// Requests returns the requests that reached a registered function, in
// arrival order. Refused requests are not recorded.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// Options returns options for a real Lambda client that talks to s:
// BaseEndpoint is s.URL, the region is us-east-1, the credentials are static
// fakes, and retries are off so that every call is exactly one request.
// They read no environment or shared config file.
func (s *Server) Options() lambda.Options {
	return lambda.Options{
		HTTPClient:   sdkhttp.Wrap(s.client),
		Region:       "us-east-1",
		BaseEndpoint: aws.String(s.URL),
		Credentials:  credentials.NewStaticCredentialsProvider("AKID", "SECRET", ""),
		Retryer:      aws.NopRetryer{},
	}
}

// Client returns a real Lambda client built from Options and then optFns.
// An HTTP client that optFns set gets the workaround of package sdkhttp too,
// as production clients do.
func (s *Server) Client(optFns ...func(*lambda.Options)) *lambda.Client {
	optFns = append(optFns, func(o *lambda.Options) { o.HTTPClient = sdkhttp.Wrap(o.HTTPClient) })
	return lambda.New(s.Options(), optFns...)
}

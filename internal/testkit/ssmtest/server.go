package ssmtest

import (
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	"github.com/lambda-agent/lambda-agent/internal/sdkhttp"
)

// AccountID is the account the parameters belong to.
const AccountID = "123456789012"

// MaxValue is the largest value Put accepts: an advanced parameter's 8 KB.
const MaxValue = 8 << 10

// Request is a read request the server received.
type Request struct {
	// Operation is GetParameter, GetParameters or GetParametersByPath.
	Operation string
	// Names are the names asked for, as sent; none for
	// GetParametersByPath.
	Names []string
	// WithDecryption is the request's WithDecryption flag.
	WithDecryption bool
	// Path, Recursive, MaxResults (0 when unset) and NextToken are
	// GetParametersByPath's, as sent.
	Path       string
	Recursive  bool
	MaxResults int
	NextToken  string
}

// Server is a stand-in for Parameter Store on a loopback port. Its methods
// are safe for concurrent use.
type Server struct {
	// URL is the server's endpoint, such as http://127.0.0.1:41234, for the
	// SDK's BaseEndpoint or AWS_ENDPOINT_URL_SSM.
	URL string

	srv    *http.Server
	client *http.Client // shared by every SDK client from Client

	mu       sync.Mutex
	params   map[string][]version // by name; version n is at n-1
	order    []string             // the names, in the order of their first Put
	requests []Request
	short    bool // SetShortPages
}

// version is one version of a parameter.
type version struct {
	value    string
	secure   bool
	modified time.Time
}

// NewServer starts a Server on a random loopback port. Call Close when done.
// Like httptest.NewServer, it panics if it cannot listen.
func NewServer() *Server {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		if ln, err = net.Listen("tcp6", "[::1]:0"); err != nil {
			panic(fmt.Sprintf("ssmtest: listen on a loopback port: %v", err))
		}
	}
	s := &Server{
		URL:    "http://" + ln.Addr().String(),
		client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}},
		params: map[string][]version{},
	}
	s.srv = &http.Server{Handler: s.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go s.srv.Serve(ln) // returns ErrServerClosed after Close
	return s
}

// Close stops the server and closes its connections.
func (s *Server) Close() {
	s.srv.Close()
	s.client.CloseIdleConnections()
}

// Handler returns the server's HTTP handler, to mount it in another server.
func (s *Server) Handler() http.Handler {
	return http.HandlerFunc(s.serveHTTP)
}

// Put stores value under name as a new version, a SecureString when secure
// and a String otherwise, as PutParameter with Overwrite does. name is a
// parameter name (not an ARN, no selector). It panics on a name or a value
// SSM would refuse, as a test that relied on one would test nothing real.
func (s *Server) Put(name, value string, secure bool) {
	if aerr := validName(name); aerr != nil {
		panic(fmt.Sprintf("ssmtest: put %q: %s", name, aerr.Message))
	}
	if value == "" || len(value) > MaxValue {
		panic(fmt.Sprintf("ssmtest: put %q: the value must hold 1 to %d bytes, not %d", name, MaxValue, len(value)))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.params[name] == nil {
		s.order = append(s.order, name)
	}
	s.params[name] = append(s.params[name], version{value: value, secure: secure, modified: time.Now()})
}

// SetShortPages makes GetParametersByPath page as SSM may when it reaches
// an internal limit: each page holds at most one parameter, and every
// other page none, with a NextToken all the same. A client that stops at
// a short or empty page, rather than at a page without a NextToken, then
// misses parameters.
func (s *Server) SetShortPages(on bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.short = on
}

// Calls returns how many read requests passed the signature check, refused
// or not.
func (s *Server) Calls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.requests)
}

// Requests returns the requests counted by Calls, in arrival order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// Options returns options for a real SSM client that talks to s:
// BaseEndpoint is s.URL, the region is us-east-1, the credentials are static
// fakes, and retries are off so that every call is exactly one request.
// They read no environment or shared config file.
func (s *Server) Options() ssm.Options {
	return ssm.Options{
		HTTPClient:   sdkhttp.Wrap(s.client),
		Region:       "us-east-1",
		BaseEndpoint: aws.String(s.URL),
		Credentials:  credentials.NewStaticCredentialsProvider("AKID", "SECRET", ""),
		Retryer:      aws.NopRetryer{},
	}
}

// Client returns a real SSM client built from Options and then optFns. An
// HTTP client that optFns set gets the workaround of package sdkhttp too, as
// production clients do.
func (s *Server) Client(optFns ...func(*ssm.Options)) *ssm.Client {
	optFns = append(optFns, func(o *ssm.Options) { o.HTTPClient = sdkhttp.Wrap(o.HTTPClient) })
	return ssm.New(s.Options(), optFns...)
}

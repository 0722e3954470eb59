// Package dynamodbtest runs a DynamoDB-compatible server in the process, for the
// local run, the tests and the benchmarks: minidyn's HTTP server on a
// loopback port, reached through the real SDK client.
//
// minidyn does not enforce the 400 KB item limit and has no TTL operations;
// the store enforces item sizes itself and treats expired items as absent, so
// neither matters to it. It accepts a key condition whose BETWEEN bounds are
// the wrong way round, which DynamoDB refuses; Server refuses it too. Its
// secondary indexes keep an item whose index key
// an update removed, where DynamoDB drops it from the sparse index: a session
// whose delete stopped half-way stays listed here, not in DynamoDB. It also sends no X-Amz-Crc32 header, which DynamoDB
// puts on every response and the SDK checks; Server adds it.
//
// minidyn guards its items with a lock but not its table map: a CreateTable
// racing any other request is a data race. Server serves one request at a
// time, which DynamoDB's per-request atomicity allows.
package dynamodbtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/lambda-agent/lambda-agent/internal/sdkhttp"
	"github.com/truora/minidyn/server"
)

// Server is an in-process DynamoDB server.
type Server struct {
	// URL is the server's endpoint, such as http://127.0.0.1:41234.
	URL string

	srv    *http.Server
	client *http.Client
	hook   atomic.Pointer[func(op string, r *http.Request)]
}

// NewServer starts a server on a random loopback port, or on addr when it is
// not empty. Call Close when done.
func NewServer(addr string) (*Server, error) {
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("dynamodbtest: listen on %s: %w", addr, err)
	}
	s := &Server{
		URL:    "http://" + ln.Addr().String(),
		client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}},
	}
	s.srv = &http.Server{Handler: withCRC32(s.hooked(strictBetween(serialized(server.NewServer())))), ReadHeaderTimeout: 10 * time.Second}
	go s.srv.Serve(ln) // returns ErrServerClosed after Close
	return s, nil
}

// serialized serves h's requests one at a time. The hook stays outside it,
// so that a request the hook holds does not hold the others.
func serialized(h http.Handler) http.Handler {
	var mu sync.Mutex
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, ok := readBody(r); !ok { // never wait on a client with the lock held
			return
		}
		mu.Lock()
		defer mu.Unlock()
		h.ServeHTTP(w, r)
	})
}

// strictBetween refuses a Query whose key condition has a BETWEEN with its
// bounds the wrong way round, as DynamoDB does and minidyn does not:
// DynamoDB answers ValidationException, where minidyn returns no items.
func strictBetween(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.Header.Get("X-Amz-Target"), ".Query") {
			h.ServeHTTP(w, r)
			return
		}
		body, ok := readBody(r)
		if !ok {
			return
		}
		if msg := reversedBetween(body); msg != "" {
			w.Header().Set("Content-Type", "application/x-amz-json-1.0")
			w.WriteHeader(http.StatusBadRequest)
			out, _ := json.Marshal(map[string]string{"__type": "com.amazon.coral.validate#ValidationException", "message": msg})
			_, _ = w.Write(out)
			return
		}
		h.ServeHTTP(w, r)
	})
}

var betweenPattern = regexp.MustCompile(`(?i)\bBETWEEN\s+(:\w+)\s+AND\s+(:\w+)`)

// reversedBetween returns DynamoDB's message for a Query whose key
// condition's BETWEEN has a lower bound above its upper bound, or "".
func reversedBetween(body []byte) string {
	var in struct {
		KeyConditionExpression    string
		ExpressionAttributeValues map[string]map[string]string
	}
	if json.Unmarshal(body, &in) != nil {
		return ""
	}
	m := betweenPattern.FindStringSubmatch(in.KeyConditionExpression)
	if m == nil {
		return ""
	}
	lo, hi := in.ExpressionAttributeValues[m[1]], in.ExpressionAttributeValues[m[2]]
	reversed := false
	switch {
	case lo["S"] != "" || hi["S"] != "":
		reversed = lo["S"] > hi["S"]
	case lo["N"] != "" && hi["N"] != "":
		l, errL := strconv.ParseFloat(lo["N"], 64)
		u, errU := strconv.ParseFloat(hi["N"], 64)
		reversed = errL == nil && errU == nil && l > u
	}
	if !reversed {
		return ""
	}
	return fmt.Sprintf("Invalid KeyConditionExpression: The BETWEEN operator requires upper bound to be greater than or equal to lower bound; lower bound operand: AttributeValue: %v, upper bound operand: AttributeValue: %v", lo, hi)
}

// SetHook makes the server call hook with each request and its operation,
// such as "TransactWriteItems", before serving it; nil removes the hook. The
// hook may block, to hold a request: a request whose client has gone when the
// hook returns, a killed process for one, is dropped unserved, as DynamoDB
// never sees a request that was never sent whole.
func (s *Server) SetHook(hook func(op string, r *http.Request)) {
	if hook == nil {
		s.hook.Store(nil)
		return
	}
	s.hook.Store(&hook)
}

func (s *Server) hooked(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hook := s.hook.Load()
		if hook == nil {
			h.ServeHTTP(w, r)
			return
		}
		// Reading the body first lets the server notice a client that goes
		// away while the hook holds the request.
		if _, ok := readBody(r); !ok {
			return
		}
		target := r.Header.Get("X-Amz-Target")
		(*hook)(target[strings.LastIndex(target, ".")+1:], r)
		if r.Context().Err() != nil {
			return
		}
		h.ServeHTTP(w, r)
	})
}

// readBody reads r's body and puts it back for the next handler; false when
// the client went away first.
func readBody(r *http.Request) ([]byte, bool) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, false
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	return body, true
}

// withCRC32 adds DynamoDB's X-Amz-Crc32 header, the CRC-32 of the body, to
// h's responses.
func withCRC32(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &recorder{header: http.Header{}, status: http.StatusOK}
		h.ServeHTTP(rec, r)
		for k, v := range rec.header {
			w.Header()[k] = v
		}
		w.Header().Set("X-Amz-Crc32", strconv.FormatUint(uint64(crc32.ChecksumIEEE(rec.body.Bytes())), 10))
		w.WriteHeader(rec.status)
		_, _ = w.Write(rec.body.Bytes())
	})
}

// recorder buffers a response.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header         { return r.header }
func (r *recorder) WriteHeader(status int)      { r.status = status }
func (r *recorder) Write(b []byte) (int, error) { return r.body.Write(b) }

// Close stops the server and closes its connections.
func (s *Server) Close() {
	s.srv.Close()
	s.client.CloseIdleConnections()
}

// Options returns options for a real DynamoDB client that talks to s, with
// static fake credentials, so that no AWS account or configuration is read.
func (s *Server) Options() dynamodb.Options {
	return dynamodb.Options{
		HTTPClient:   sdkhttp.Wrap(s.client),
		Region:       "us-east-1",
		BaseEndpoint: aws.String(s.URL),
		Credentials:  credentials.NewStaticCredentialsProvider("local", "local", ""),
	}
}

// Client returns a real DynamoDB client that talks to s. An HTTP client that
// optFns set gets the workaround of package sdkhttp too, as production
// clients do.
func (s *Server) Client(optFns ...func(*dynamodb.Options)) *dynamodb.Client {
	optFns = append(optFns, func(o *dynamodb.Options) { o.HTTPClient = sdkhttp.Wrap(o.HTTPClient) })
	return dynamodb.New(s.Options(), optFns...)
}

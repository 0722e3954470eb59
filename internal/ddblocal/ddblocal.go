// Package ddblocal runs a DynamoDB-compatible server in the process, for the
// local run, the tests and the benchmarks: minidyn's HTTP server on a
// loopback port, reached through the real SDK client.
//
// minidyn does not enforce the 400 KB item limit and has no TTL operations;
// the store enforces item sizes itself and treats expired items as absent, so
// neither matters to it. It also sends no X-Amz-Crc32 header, which DynamoDB
// puts on every response and the SDK checks; Server adds it.
package ddblocal

import (
	"bytes"
	"fmt"
	"hash/crc32"
	"net"
	"net/http"
	"strconv"
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
}

// NewServer starts a server on a random loopback port, or on addr when it is
// not empty. Call Close when done.
func NewServer(addr string) (*Server, error) {
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("ddblocal: listen on %s: %w", addr, err)
	}
	s := &Server{
		URL:    "http://" + ln.Addr().String(),
		srv:    &http.Server{Handler: withCRC32(server.NewServer()), ReadHeaderTimeout: 10 * time.Second},
		client: &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}},
	}
	go s.srv.Serve(ln) // returns ErrServerClosed after Close
	return s, nil
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

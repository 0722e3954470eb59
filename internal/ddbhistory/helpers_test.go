package ddbhistory_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/ddbhistory"
	"github.com/lambda-agent/lambda-agent/internal/testkit"
	"github.com/lambda-agent/lambda-agent/internal/testkit/dynamodbtest"
)

// backend is a DynamoDB implementation the suite runs against.
type backend struct {
	name string
	opts func(t testing.TB) dynamodb.Options
}

// backends are minidyn's in-process server, always, and the server at
// DYNAMODB_TEST_ENDPOINT (moto_server, DynamoDB Local) when it is set.
func backends() []backend {
	bs := []backend{{name: "minidyn", opts: func(t testing.TB) dynamodb.Options {
		srv, err := dynamodbtest.NewServer("")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(srv.Close)
		return srv.Options()
	}}}
	if ep := os.Getenv("DYNAMODB_TEST_ENDPOINT"); ep != "" {
		bs = append(bs, backend{name: "external", opts: func(testing.TB) dynamodb.Options {
			return dynamodb.Options{
				Region:       "us-east-1",
				BaseEndpoint: aws.String(ep),
				Credentials:  credentials.NewStaticCredentialsProvider("test", "test", ""),
			}
		}})
	}
	return bs
}

// counter meters what a client sends and receives (dynamodbtest.Meter), and can
// inject faults.
type counter struct {
	meter dynamodbtest.Meter

	mu sync.Mutex
	// fault, when set, may answer a request instead of the server.
	fault func(op string, body []byte) *http.Response
	// lose, when set, sees each request after the server answered it, and
	// may return an error for the client to get instead of the answer: the
	// server applied the request, but its answer was lost.
	lose func(op string, r *http.Request) error
}

func (c *counter) RoundTrip(r *http.Request) (*http.Response, error) {
	c.mu.Lock()
	fault, lose := c.fault, c.lose
	c.mu.Unlock()
	if lose != nil {
		target := r.Header.Get("X-Amz-Target")
		resp, err := c.meter.RoundTrip(r)
		if err == nil {
			if err = lose(target[strings.LastIndex(target, ".")+1:], r); err != nil {
				resp.Body.Close()
				return nil, err
			}
		}
		return resp, err
	}
	if fault != nil {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return nil, err
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		target := r.Header.Get("X-Amz-Target")
		if resp := fault(target[strings.LastIndex(target, ".")+1:], body); resp != nil {
			resp.Request = r
			return resp, nil
		}
	}
	return c.meter.RoundTrip(r)
}

// reset returns what was used since the last reset.
func (c *counter) reset() dynamodbtest.Usage { return c.meter.Take() }

func (c *counter) setFault(f func(op string, body []byte) *http.Response) {
	c.mu.Lock()
	c.fault = f
	c.mu.Unlock()
}

func (c *counter) setLose(f func(op string, r *http.Request) error) {
	c.mu.Lock()
	c.lose = f
	c.mu.Unlock()
}

// pause returns a fault that holds the nth request of op (counting from 1)
// until release is closed, after closing reached; other requests pass.
func pause(op string, nth int) (fault func(string, []byte) *http.Response, reached, release chan struct{}) {
	reached, release = make(chan struct{}), make(chan struct{})
	var mu sync.Mutex
	seen := 0
	return func(o string, _ []byte) *http.Response {
		if o != op {
			return nil
		}
		mu.Lock()
		seen++
		hit := seen == nth
		mu.Unlock()
		if hit {
			close(reached)
			<-release
		}
		return nil
	}, reached, release
}

// throttle is the response DynamoDB sends when it throttles.
func throttle() *http.Response {
	return dynamodbtest.ErrorResponse(nil, "ThrottlingException", "Rate of requests exceeds the allowed throughput.")
}

// env is one backend with a fresh table, a counting client and a store.
type env struct {
	client *dynamodb.Client
	count  *counter
	store  *ddbhistory.Store
	table  string
	now    *testkit.Clock
}

func newEnv(t testing.TB, b backend, cfg ddbhistory.Config) *env {
	t.Helper()
	opts := b.opts(t)
	cnt := &counter{}
	if hc, ok := opts.HTTPClient.(*http.Client); ok && hc.Transport != nil {
		cnt.meter.Next = hc.Transport
	}
	opts.HTTPClient = &http.Client{Transport: cnt}
	// Quick retries, so that throttling tests do not wait for the SDK's
	// production backoff.
	opts.Retryer = retry.NewStandard(func(o *retry.StandardOptions) {
		o.Backoff = retry.BackoffDelayerFunc(func(int, error) (time.Duration, error) { return time.Millisecond, nil })
		o.RateLimiter = noRateLimit{}
	})
	client := dynamodb.New(opts)
	table := "sessions-" + strings.ToLower(rand.Text()[:12])
	if err := ddbhistory.CreateTable(t.Context(), client, table); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = client.DeleteTable(context.Background(), &dynamodb.DeleteTableInput{TableName: aws.String(table)})
	})
	e := &env{client: client, count: cnt, table: table, now: testkit.NewClock(time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC))}
	cfg.Table = table
	if cfg.Now == nil {
		cfg.Now = e.now.Now
	}
	s, err := ddbhistory.New(client, cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.store = s
	e.count.reset()
	return e
}

type noRateLimit struct{}

func (noRateLimit) GetToken(context.Context, uint) (func() error, error) {
	return func() error { return nil }, nil
}
func (noRateLimit) AddTokens(uint) error { return nil }

// runBackends runs f as a subtest against every backend.
func runBackends(t *testing.T, f func(t *testing.T, b backend)) {
	for _, b := range backends() {
		t.Run(b.name, func(t *testing.T) { f(t, b) })
	}
}

// turn returns a plain turn: a question and its answer.
func turn(i int) []agent.Message {
	return []agent.Message{agent.UserText(fmt.Sprintf("question %d", i)), agent.AssistantText(fmt.Sprintf("answer %d", i))}
}

// sizedTurn is a turn whose size does not depend on i.
func sizedTurn(i int) []agent.Message {
	return []agent.Message{agent.UserText(fmt.Sprintf("question %06d", i)), agent.AssistantText(fmt.Sprintf("answer %06d", i))}
}

// fill commits turns until the session holds n messages, in transactions of
// up to 98 messages (with the session item, the most one holds), with a
// window of the last `window` messages.
func fill(t testing.TB, s *ddbhistory.Store, key ddbhistory.Key, n, window int) *ddbhistory.Session {
	t.Helper()
	sess := ddbhistory.NewSession(key)
	for i := 0; sess.Count < n; {
		var msgs []agent.Message
		for len(msgs) < 98 && sess.Count+len(msgs) < n {
			msgs = append(msgs, sizedTurn(i)...)
			i++
		}
		count := sess.Count + len(msgs)
		if err := s.Commit(context.Background(), sess, ddbhistory.Turn{
			Messages: msgs,
			Window:   agent.WindowState{Removed: max(0, count-window)},
		}); err != nil {
			t.Fatal(err)
		}
	}
	return sess
}

// mustBegin holds an idempotency key for a turn on sess.
func mustBegin(t testing.TB, s *ddbhistory.Store, sess *ddbhistory.Session, key string) *ddbhistory.Hold {
	t.Helper()
	hold, err := s.Begin(t.Context(), sess, key, "fp")
	if err != nil {
		t.Fatalf("Begin %s: %v", key, err)
	}
	return hold
}

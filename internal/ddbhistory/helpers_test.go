package ddbhistory_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/ddbhistory"
	"github.com/lambda-agent/lambda-agent/internal/ddblocal"
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
		srv, err := ddblocal.NewServer("")
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

// counter counts the requests and bytes a client sends and receives, and can
// inject faults.
type counter struct {
	next http.RoundTripper

	requests, sent, received atomic.Int64
	mu                       sync.Mutex
	ops                      []string
	rcu, wcu                 float64
	// fault, when set, may answer a request instead of the server.
	fault func(op string, body []byte) *http.Response
}

func (c *counter) RoundTrip(r *http.Request) (*http.Response, error) {
	op := r.Header.Get("X-Amz-Target")
	op = op[strings.LastIndex(op, ".")+1:]
	c.mu.Lock()
	c.ops = append(c.ops, op)
	fault := c.fault
	c.mu.Unlock()
	c.requests.Add(1)
	c.sent.Add(r.ContentLength)
	if fault != nil {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return nil, err
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		if resp := fault(op, body); resp != nil {
			resp.Request = r
			return resp, nil
		}
	}
	var reqBody []byte
	if r.Body != nil {
		var err error
		if reqBody, err = io.ReadAll(r.Body); err != nil {
			return nil, err
		}
		r.Body = io.NopCloser(bytes.NewReader(reqBody))
	}
	resp, err := c.next.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	c.received.Add(int64(len(body)))
	resp.Body = io.NopCloser(bytes.NewReader(body))
	if resp.StatusCode == http.StatusOK {
		rcu, wcu := capacity(op, reqBody, body)
		c.mu.Lock()
		c.rcu += rcu
		c.wcu += wcu
		c.mu.Unlock()
	}
	return resp, nil
}

// capacity computes the read and write capacity units a successful request
// consumed, from the items on the wire, by DynamoDB's rules: strongly
// consistent reads cost 1 RCU per 4 KB (a query rounds its total, GetItem its
// item), writes 1 WCU per KB per item, doubled in transactions.
func capacity(op string, req, resp []byte) (rcu, wcu float64) {
	type wireItem = map[string]map[string]json.RawMessage
	units := func(bytes, unit int) float64 { return float64(max(1, (bytes+unit-1)/unit)) }
	switch op {
	case "Query":
		var out struct{ Items []wireItem }
		_ = json.Unmarshal(resp, &out)
		total := 0
		for _, it := range out.Items {
			total += wireSize(it)
		}
		return units(total, 4096), 0
	case "GetItem":
		var out struct{ Item wireItem }
		_ = json.Unmarshal(resp, &out)
		return units(wireSize(out.Item), 4096), 0
	case "TransactWriteItems":
		var in struct {
			TransactItems []struct {
				Put    *struct{ Item wireItem }
				Update *struct{ Key wireItem }
				Delete *struct{ Key wireItem }
			}
		}
		_ = json.Unmarshal(req, &in)
		for _, ti := range in.TransactItems {
			switch {
			case ti.Put != nil:
				wcu += 2 * units(wireSize(ti.Put.Item), 1024)
			default:
				wcu += 2 // an update or delete of a small item
			}
		}
		return 0, wcu
	case "BatchWriteItem", "DeleteItem", "PutItem", "UpdateItem":
		return 0, 1
	}
	return 0, 0
}

// wireSize is the size of an item in DynamoDB's JSON: names plus values.
func wireSize(it map[string]map[string]json.RawMessage) int {
	n := 0
	for name, v := range it {
		n += len(name)
		for typ, raw := range v {
			var s string
			switch typ {
			case "S", "N":
				_ = json.Unmarshal(raw, &s)
				n += len(s)
			case "B":
				_ = json.Unmarshal(raw, &s)
				n += base64.StdEncoding.DecodedLen(len(s))
			default:
				n += len(raw)
			}
		}
	}
	return n
}

// reset zeroes the counts and returns what they were.
func (c *counter) reset() (requests, sent, received int64, ops []string) {
	c.mu.Lock()
	ops, c.ops = c.ops, nil
	c.rcu, c.wcu = 0, 0
	c.mu.Unlock()
	return c.requests.Swap(0), c.sent.Swap(0), c.received.Swap(0), ops
}

// units returns the capacity consumed since the last reset.
func (c *counter) units() (rcu, wcu float64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.rcu, c.wcu
}

func (c *counter) setFault(f func(op string, body []byte) *http.Response) {
	c.mu.Lock()
	c.fault = f
	c.mu.Unlock()
}

// throttle is the response DynamoDB sends when it throttles.
func throttle() *http.Response {
	body := `{"__type":"com.amazonaws.dynamodb.v20120810#ThrottlingException","message":"Rate of requests exceeds the allowed throughput."}`
	return &http.Response{
		StatusCode: 400,
		Header:     http.Header{"Content-Type": {"application/x-amz-json-1.0"}},
		Body:       io.NopCloser(strings.NewReader(body)),
	}
}

// env is one backend with a fresh table, a counting client and a store.
type env struct {
	client *dynamodb.Client
	count  *counter
	store  *ddbhistory.Store
	table  string
	now    *clock
}

// clock is a settable time for expiry tests.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func newEnv(t testing.TB, b backend, cfg ddbhistory.Config) *env {
	t.Helper()
	opts := b.opts(t)
	cnt := &counter{next: http.DefaultTransport}
	if hc, ok := opts.HTTPClient.(*http.Client); ok && hc.Transport != nil {
		cnt.next = hc.Transport
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
	e := &env{client: client, count: cnt, table: table, now: &clock{t: time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC)}}
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

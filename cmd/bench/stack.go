package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sync/atomic"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/app"
	"github.com/lambda-agent/lambda-agent/internal/conversetest"
	"github.com/lambda-agent/lambda-agent/internal/ddbhistory"
	"github.com/lambda-agent/lambda-agent/internal/ddblocal"
	"github.com/lambda-agent/lambda-agent/internal/httpapi"
	"github.com/lambda-agent/lambda-agent/internal/schema"
)

const table = "sessions"

// stack is the chat handler wired as a function wires it, on the Converse
// stand-in and an in-process DynamoDB, with its DynamoDB client metered and
// timed.
type stack struct {
	h     *httpapi.Handler
	model *conversetest.Server
	ddb   *ddblocal.Server
	store *ddbhistory.Store
	meter *ddblocal.Meter
	timer *timer // time in DynamoDB requests
	// modelTimer is the time in Converse requests.
	modelTimer *timer
}

// timer adds up the time a client spends in requests.
type timer struct {
	next http.RoundTripper
	ns   atomic.Int64
}

func (t *timer) RoundTrip(r *http.Request) (*http.Response, error) {
	start := time.Now()
	resp, err := t.next.RoundTrip(r)
	t.ns.Add(int64(time.Since(start)))
	return resp, err
}

func (t *timer) take() time.Duration { return time.Duration(t.ns.Swap(0)) }

func newStack(ctx context.Context, env map[string]string) (*stack, error) {
	ddb, err := ddblocal.NewServer("")
	if err != nil {
		return nil, err
	}
	meter := &ddblocal.Meter{}
	tm := &timer{next: meter}
	client := ddb.Client(func(o *dynamodb.Options) { o.HTTPClient = &http.Client{Transport: tm} })
	if err := ddbhistory.CreateTable(ctx, ddb.Client(), table); err != nil {
		return nil, err
	}
	model := conversetest.NewServer()
	vars := map[string]string{"TABLE_NAME": table, "MODEL_ID": "bench-model"}
	for k, v := range env {
		vars[k] = v
	}
	cfg, err := app.FromEnv(func(k string) string { return vars[k] })
	if err != nil {
		return nil, err
	}
	mt := &timer{next: http.DefaultTransport}
	bedrock := model.Client(func(o *bedrockruntime.Options) { o.HTTPClient = &http.Client{Transport: mt} })
	h, err := app.New(cfg, bedrock, client, schema.Compile, slog.New(slog.DiscardHandler))
	if err != nil {
		return nil, err
	}
	store, err := ddbhistory.New(ddb.Client(), ddbhistory.Config{Table: table})
	if err != nil {
		return nil, err
	}
	return &stack{h: h, model: model, ddb: ddb, store: store, meter: meter, timer: tm, modelTimer: mt}, nil
}

func (s *stack) Close() {
	s.model.Close()
	s.ddb.Close()
}

// fill stores n messages in a session, the last 40 of them its window.
func (s *stack) fill(ctx context.Context, id string, n int) error {
	sess := ddbhistory.NewSession(ddbhistory.Key{Owner: "anonymous", ID: id})
	for i := 0; sess.Count < n; {
		var msgs []agent.Message
		for len(msgs) < 98 && sess.Count+len(msgs) < n {
			msgs = append(msgs, agent.UserText(fmt.Sprintf("question %06d", i)), agent.AssistantText(fmt.Sprintf("answer %06d", i)))
			i++
		}
		count := sess.Count + len(msgs)
		if err := s.store.Commit(ctx, sess, ddbhistory.Turn{Messages: msgs, Window: agent.WindowState{Removed: max(0, count-40)}}); err != nil {
			return err
		}
	}
	return nil
}

// chat sends one chat turn through the handler and returns its answer.
func (s *stack) chat(ctx context.Context, id, message string) (httpapi.ChatResponse, error) {
	return s.chatWithKey(ctx, id, message, "")
}

// chatWithKey is chat with an Idempotency-Key, unless key is empty.
func (s *stack) chatWithKey(ctx context.Context, id, message, key string) (httpapi.ChatResponse, error) {
	body, _ := json.Marshal(map[string]string{"session_id": id, "message": message})
	ev := events.APIGatewayV2HTTPRequest{
		RouteKey: httpapi.RouteChat,
		RawPath:  "/chat",
		Body:     string(body),
		Headers:  map[string]string{},
		RequestContext: events.APIGatewayV2HTTPRequestContext{
			RequestID: "bench",
			HTTP:      events.APIGatewayV2HTTPRequestContextHTTPDescription{Method: "POST", Path: "/chat"},
		},
	}
	if key != "" {
		ev.Headers["idempotency-key"] = key
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	ctx = lambdacontext.NewContext(ctx, &lambdacontext.LambdaContext{AwsRequestID: "bench"})
	resp, err := s.h.Chat(ctx, ev)
	if err != nil {
		return httpapi.ChatResponse{}, err
	}
	if resp.StatusCode != 200 {
		return httpapi.ChatResponse{}, fmt.Errorf("chat: %d %s", resp.StatusCode, resp.Body)
	}
	var out httpapi.ChatResponse
	return out, json.Unmarshal([]byte(resp.Body), &out)
}

// percentile returns the p-th percentile of d (0 < p <= 100), nearest rank.
func percentile(d []time.Duration, p float64) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	i := int(float64(len(s))*p/100+0.999999) - 1
	return s[min(max(i, 0), len(s)-1)]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d.Microseconds())/1000) }

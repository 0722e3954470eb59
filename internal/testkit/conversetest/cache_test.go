package conversetest_test

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"
	"github.com/google/go-cmp/cmp"

	"github.com/lambda-agent/lambda-agent/internal/testkit"
	"github.com/lambda-agent/lambda-agent/internal/testkit/conversetest"
)

// newClock returns the fake clock of the cache's TTL.
func newClock() *testkit.Clock {
	return testkit.NewClock(time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC))
}

// cacheUsage is the part of a usage that the cache decides.
type cacheUsage struct {
	In, Read, Write int32
}

// usageOf reads usage, checking that the total adds everything up.
func usageOf(t *testing.T, u *types.TokenUsage) cacheUsage {
	t.Helper()
	if u == nil {
		t.Fatal("no usage")
	}
	got := cacheUsage{In: aws.ToInt32(u.InputTokens), Read: aws.ToInt32(u.CacheReadInputTokens), Write: aws.ToInt32(u.CacheWriteInputTokens)}
	if total, want := aws.ToInt32(u.TotalTokens), got.In+got.Read+got.Write+aws.ToInt32(u.OutputTokens); total != want {
		t.Errorf("totalTokens = %d, want %d (input + read + write + output)", total, want)
	}
	return got
}

// words returns n bytes of text (n/4 estimated tokens) made of seed.
func words(seed string, n int) string {
	return strings.Repeat(seed, n/len(seed)+1)[:n]
}

var cachePoint = types.CachePointBlock{Type: types.CachePointTypeDefault}

func cpBlock() types.ContentBlock { return &types.ContentBlockMemberCachePoint{Value: cachePoint} }

func cpSystem() types.SystemContentBlock {
	return &types.SystemContentBlockMemberCachePoint{Value: cachePoint}
}

func systemText(s string) types.SystemContentBlock {
	return &types.SystemContentBlockMemberText{Value: s}
}

// cacheServer starts a server with the cache on, a minimum of minTokens and
// the fake clock c.
func cacheServer(t *testing.T, minTokens int, c *testkit.Clock) *conversetest.Server {
	t.Helper()
	srv := newServer(t)
	srv.EnableCache(conversetest.CacheConfig{MinTokens: minTokens, Now: c.Now})
	return srv
}

func converseUsage(t *testing.T, srv *conversetest.Server, in *bedrockruntime.ConverseInput) cacheUsage {
	t.Helper()
	out, err := srv.Client().Converse(t.Context(), in)
	if err != nil {
		t.Fatalf("Converse: %v", err)
	}
	return usageOf(t, out.Usage)
}

func TestCacheWriteThenRead(t *testing.T) {
	srv := cacheServer(t, 100, newClock())
	in := &bedrockruntime.ConverseInput{
		ModelId:  aws.String(modelID),
		System:   []types.SystemContentBlock{systemText(words("policy ", 1600)), cpSystem()},
		Messages: []types.Message{user(text(words("ask ", 40)))},
	}
	if got, want := converseUsage(t, srv, in), (cacheUsage{In: 10, Write: 400}); got != want {
		t.Errorf("first request: usage %+v, want %+v", got, want)
	}
	if got, want := converseUsage(t, srv, in), (cacheUsage{In: 10, Read: 400}); got != want {
		t.Errorf("identical request: usage %+v, want %+v", got, want)
	}

	// ConverseStream reports the same usage in its metadata event.
	streamed := converseStream(t, srv.Client(), &bedrockruntime.ConverseStreamInput{
		ModelId: in.ModelId, System: in.System, Messages: in.Messages,
	})
	if streamed.err != nil {
		t.Fatal(streamed.err)
	}
	if got, want := usageOf(t, streamed.usage), (cacheUsage{In: 10, Read: 400}); got != want {
		t.Errorf("streamed request: usage %+v, want %+v", got, want)
	}

	// Another model has a cache of its own.
	other := *in
	other.ModelId = aws.String("anthropic.claude-sonnet-4-20250514-v1:0")
	if got, want := converseUsage(t, srv, &other), (cacheUsage{In: 10, Write: 400}); got != want {
		t.Errorf("other model: usage %+v, want %+v", got, want)
	}

	want := conversetest.CacheStats{Hits: 2, Writes: 2, ReadInputTokens: 800, WriteInputTokens: 800, Entries: 2}
	if diff := cmp.Diff(want, srv.CacheStats()); diff != "" {
		t.Errorf("CacheStats() mismatch (-want +got):\n%s", diff)
	}
}

func TestCacheExtendedPrefix(t *testing.T) {
	srv := cacheServer(t, 100, newClock())
	sys := []types.SystemContentBlock{systemText(words("policy ", 800)), cpSystem()}
	u1, a1, u2 := words("first ", 400), words("answer ", 200), words("second ", 400)

	first := &bedrockruntime.ConverseInput{
		ModelId:  aws.String(modelID),
		System:   sys,
		Messages: []types.Message{user(text(u1), cpBlock())},
	}
	// 200 tokens of system and 100 of u1, each point writing its prefix.
	if got, want := converseUsage(t, srv, first), (cacheUsage{Write: 300}); got != want {
		t.Errorf("first turn: usage %+v, want %+v", got, want)
	}

	// The next turn moves the message point past the new messages. The
	// lookback finds the prefix the first turn cached, and only the new
	// part is written.
	second := &bedrockruntime.ConverseInput{
		ModelId:  aws.String(modelID),
		System:   sys,
		Messages: []types.Message{user(text(u1)), assistant(text(a1)), user(text(u2), cpBlock())},
	}
	if got, want := converseUsage(t, srv, second), (cacheUsage{Read: 300, Write: 150}); got != want {
		t.Errorf("second turn: usage %+v, want %+v", got, want)
	}

	// A third turn without a message point still reads the system prefix,
	// and the question after the cache point is plain input.
	third := &bedrockruntime.ConverseInput{
		ModelId:  aws.String(modelID),
		System:   sys,
		Messages: []types.Message{user(text(u1 + "?"))},
	}
	if got, want := converseUsage(t, srv, third), (cacheUsage{In: 100, Read: 200}); got != want {
		t.Errorf("third turn: usage %+v, want %+v", got, want)
	}
}

func TestCacheChangedEarlyMessageMisses(t *testing.T) {
	srv := cacheServer(t, 100, newClock())
	conversation := func(opening string) *bedrockruntime.ConverseInput {
		return &bedrockruntime.ConverseInput{
			ModelId: aws.String(modelID),
			Messages: []types.Message{
				user(text(opening)),
				assistant(text(words("answer ", 400))),
				user(text(words("more ", 400)), cpBlock()),
			},
		}
	}
	if got, want := converseUsage(t, srv, conversation(words("hello ", 400))), (cacheUsage{Write: 300}); got != want {
		t.Errorf("first request: usage %+v, want %+v", got, want)
	}
	if got, want := converseUsage(t, srv, conversation(words("howdy ", 400))), (cacheUsage{Write: 300}); got != want {
		t.Errorf("changed first message: usage %+v, want %+v (a miss)", got, want)
	}
}

func TestCacheBelowMinimum(t *testing.T) {
	srv := cacheServer(t, 1024, newClock())
	in := &bedrockruntime.ConverseInput{
		ModelId:  aws.String(modelID),
		System:   []types.SystemContentBlock{systemText(words("policy ", 4000)), cpSystem()},
		Messages: []types.Message{user(text(words("ask ", 40)))},
	}
	for i := range 2 {
		if got, want := converseUsage(t, srv, in), (cacheUsage{In: 1010}); got != want {
			t.Errorf("request %d: usage %+v, want %+v (1000 tokens are below the minimum)", i, got, want)
		}
	}
	if got := srv.CacheStats(); got != (conversetest.CacheStats{}) {
		t.Errorf("CacheStats() = %+v, want nothing cached", got)
	}
}

func TestCacheTTL(t *testing.T) {
	c := newClock()
	srv := cacheServer(t, 100, c)
	in := &bedrockruntime.ConverseInput{
		ModelId:  aws.String(modelID),
		System:   []types.SystemContentBlock{systemText(words("policy ", 800)), cpSystem()},
		Messages: []types.Message{user(text("hi there"))},
	}
	steps := []struct {
		after time.Duration
		want  cacheUsage
	}{
		{0, cacheUsage{In: 2, Write: 200}},
		{4 * time.Minute, cacheUsage{In: 2, Read: 200}},               // within the TTL: a hit, which renews
		{4 * time.Minute, cacheUsage{In: 2, Read: 200}},               // 8 minutes after the write, 4 after the hit
		{5*time.Minute + time.Second, cacheUsage{In: 2, Write: 200}},  // expired
		{5*time.Minute - time.Second, cacheUsage{In: 2, Read: 200}},   // the rewrite lives again
		{conversetest.DefaultCacheTTL, cacheUsage{In: 2, Write: 200}}, // expiry is exact
	}
	for i, step := range steps {
		c.Advance(step.after)
		if got := converseUsage(t, srv, in); got != step.want {
			t.Errorf("step %d (+%v): usage %+v, want %+v", i, step.after, got, step.want)
		}
	}
}

func TestCacheOneHourTTL(t *testing.T) {
	c := newClock()
	srv := cacheServer(t, 100, c)
	in := &bedrockruntime.ConverseInput{
		ModelId: aws.String(modelID),
		System: []types.SystemContentBlock{
			systemText(words("policy ", 800)),
			&types.SystemContentBlockMemberCachePoint{Value: types.CachePointBlock{Type: types.CachePointTypeDefault, Ttl: types.CacheTTLOneHour}},
		},
		Messages: []types.Message{user(text("hi there"))},
	}
	converseUsage(t, srv, in)
	c.Advance(59 * time.Minute)
	if got, want := converseUsage(t, srv, in), (cacheUsage{In: 2, Read: 200}); got != want {
		t.Errorf("59 minutes later: usage %+v, want %+v", got, want)
	}
}

func TestCacheToolsPoint(t *testing.T) {
	srv := cacheServer(t, 10, newClock())
	tc := tools("get_weather", "get_time")
	tc.Tools = append(tc.Tools, &types.ToolMemberCachePoint{Value: cachePoint})
	in := &bedrockruntime.ConverseInput{
		ModelId:    aws.String(modelID),
		ToolConfig: tc,
		Messages:   []types.Message{user(text(words("ask ", 400)))},
	}
	first := converseUsage(t, srv, in)
	if first.Write == 0 || first.Read != 0 || first.In != 100 {
		t.Errorf("first request: usage %+v, want the tools written and 100 tokens of input", first)
	}
	if got, want := converseUsage(t, srv, in), (cacheUsage{In: 100, Read: first.Write}); got != want {
		t.Errorf("identical request: usage %+v, want %+v", got, want)
	}
}

func TestCacheScriptedUsageWins(t *testing.T) {
	srv := cacheServer(t, 100, newClock())
	srv.Enqueue(conversetest.Text("ok").WithUsage(3, 4))
	in := &bedrockruntime.ConverseInput{
		ModelId:  aws.String(modelID),
		System:   []types.SystemContentBlock{systemText(words("policy ", 800)), cpSystem()},
		Messages: []types.Message{user(text("hi there"))},
	}
	out, err := srv.Client().Converse(t.Context(), in)
	if err != nil {
		t.Fatalf("Converse: %v", err)
	}
	if got, want := usageOf(t, out.Usage), (cacheUsage{In: 3}); got != want {
		t.Errorf("usage %+v, want the scripted %+v", got, want)
	}
	// The request still went through the cache.
	if got, want := converseUsage(t, srv, in), (cacheUsage{In: 2, Read: 200}); got != want {
		t.Errorf("next request: usage %+v, want %+v", got, want)
	}
}

func TestCacheOffByDefault(t *testing.T) {
	srv := newServer(t)
	in := &bedrockruntime.ConverseInput{
		ModelId:  aws.String(modelID),
		System:   []types.SystemContentBlock{systemText(words("policy ", 8000)), cpSystem()},
		Messages: []types.Message{user(text("hi there"))},
	}
	for range 2 {
		if got, want := converseUsage(t, srv, in), (cacheUsage{In: 2002}); got != want {
			t.Errorf("usage %+v, want %+v", got, want)
		}
	}
}

func TestCacheTooManyPoints(t *testing.T) {
	srv := newServer(t)
	tc := tools("get_weather")
	tc.Tools = append(tc.Tools, &types.ToolMemberCachePoint{Value: cachePoint})
	_, err := srv.Client().Converse(t.Context(), &bedrockruntime.ConverseInput{
		ModelId:    aws.String(modelID),
		ToolConfig: tc,
		System:     []types.SystemContentBlock{systemText("s"), cpSystem()},
		Messages: []types.Message{
			user(text("a"), cpBlock()),
			assistant(text("b"), cpBlock()),
			user(text("c"), cpBlock()),
		},
	})
	if !isA[*types.ValidationException](err) {
		t.Fatalf("error = %v, want a ValidationException", err)
	}
	want := "The model returned the following errors: A maximum of 4 blocks with cache_control may be provided. Found 5."
	if got := srv.Violations(); len(got) != 1 || got[0] != want {
		t.Errorf("Violations() = %q, want [%q]", got, want)
	}
}

func TestWireCachePointRules(t *testing.T) {
	tool := `{"toolSpec":{"name":"get_weather","inputSchema":{"json":{"type":"object"}}}}`
	tests := []struct {
		name string
		body string
		want string
	}{
		{
			name: "extra member",
			body: `{"messages":[{"role":"user","content":[{"text":"a"},{"cachePoint":{"type":"default","scope":"global"}}]}]}`,
			want: `messages[0].content[1].cachePoint: unknown member "scope"`,
		},
		{
			name: "missing type",
			body: `{"messages":[` + converseUser + `],"system":[{"text":"s"},{"cachePoint":{}}]}`,
			want: `system[1].cachePoint.type: "" is not default`,
		},
		{
			name: "unknown ttl",
			body: `{"messages":[` + converseUser + `],"system":[{"text":"s"},{"cachePoint":{"type":"default","ttl":"2h"}}]}`,
			want: `system[1].cachePoint.ttl: "2h" is not 5m or 1h`,
		},
		{
			name: "tool point with extra member",
			body: `{"messages":[` + converseUser + `],"toolConfig":{"tools":[` + tool + `,{"cachePoint":{"type":"default","x":1}}]}}`,
			want: `toolConfig.tools[1].cachePoint: unknown member "x"`,
		},
		{
			name: "message of cache points only",
			body: `{"messages":[{"role":"user","content":[{"cachePoint":{"type":"default"}}]}]}`,
			want: "messages[0]: content must hold a block other than cachePoint",
		},
		{
			name: "tools of cache points only",
			body: `{"messages":[` + converseUser + `],"toolConfig":{"tools":[{"cachePoint":{"type":"default"}}]}}`,
			want: "toolConfig.tools: must hold a tool other than cachePoint",
		},
		{
			name: "after reasoning",
			body: `{"messages":[{"role":"user","content":[{"text":"a"}]},` +
				`{"role":"assistant","content":[{"reasoningContent":{"reasoningText":{"text":"hm","signature":"s"}}},{"cachePoint":{"type":"default"}},{"text":"b"}]},` +
				`{"role":"user","content":[{"text":"c"}]}]}`,
			want: "messages[1].content[1]: Cache point cannot be inserted after reasoning block.",
		},
		{
			name: "1h after 5m",
			body: `{"messages":[{"role":"user","content":[{"text":"a"},{"cachePoint":{"type":"default","ttl":"1h"}}]}],` +
				`"system":[{"text":"s"},{"cachePoint":{"type":"default"}}]}`,
			want: "messages[0].content[1].cachePoint: a cache point with ttl 1h must not come after one with ttl 5m",
		},
		{
			name: "cache point in a toolResult",
			body: `{"messages":[{"role":"user","content":[{"text":"a"}]},` +
				`{"role":"assistant","content":[{"toolUse":{"toolUseId":"t1","name":"get_weather","input":{}}}]},` +
				`{"role":"user","content":[{"toolResult":{"toolUseId":"t1","content":[{"text":"ok"},{"cachePoint":{"type":"default"}}]}}]}],` +
				`"toolConfig":{"tools":[` + tool + `]}}`,
			want: `messages[2].content[0].toolResult.content[1]: unknown toolResult content member "cachePoint"`,
		},
	}
	srv := newServer(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := post(t, srv, http.MethodPost, "/model/"+modelID+"/converse", tt.body)
			if got.status != http.StatusBadRequest || got.errorType != "ValidationException" {
				t.Errorf("status, error type = %d, %q; want 400, ValidationException", got.status, got.errorType)
			}
			msg, _ := got.body["message"].(string)
			if !strings.Contains(msg, tt.want) {
				t.Errorf("message = %q, want it to contain %q", msg, tt.want)
			}
		})
	}
}

func TestWireCachePointsAccepted(t *testing.T) {
	tool := `{"toolSpec":{"name":"get_weather","inputSchema":{"json":{"type":"object"}}}}`
	tests := []accepted{
		{"four points everywhere", `{"messages":[{"role":"user","content":[{"text":"a"},{"cachePoint":{"type":"default"}}]},` +
			`{"role":"assistant","content":[{"text":"b"}]},{"role":"user","content":[{"text":"c"},{"cachePoint":{"type":"default","ttl":"5m"}}]}],` +
			`"system":[{"text":"s"},{"cachePoint":{"type":"default"}}],"toolConfig":{"tools":[` + tool + `,{"cachePoint":{"type":"default","ttl":"1h"}}]}}`},
		{"point first in a message", `{"messages":[{"role":"user","content":[{"cachePoint":{"type":"default"}},{"text":"a"}]}]}`},
		{"point after a toolResult", `{"messages":[{"role":"user","content":[{"text":"a"}]},` +
			`{"role":"assistant","content":[{"toolUse":{"toolUseId":"t1","name":"get_weather","input":{}}}]},` +
			`{"role":"user","content":[{"toolResult":{"toolUseId":"t1","content":[{"text":"ok"}]}},{"cachePoint":{"type":"default"}}]}],` +
			`"toolConfig":{"tools":[` + tool + `]}}`},
	}
	srv := newServer(t)
	srv.EnableCache(conversetest.CacheConfig{MinTokens: 1})
	wantAccepted(t, srv, tests)
}

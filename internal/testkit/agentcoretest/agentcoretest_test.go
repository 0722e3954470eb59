package agentcoretest_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/bedrockagentcore"
	"github.com/aws/aws-sdk-go-v2/service/bedrockagentcore/types"
	"github.com/aws/smithy-go/middleware"
	"github.com/google/go-cmp/cmp"

	"github.com/lambda-agent/lambda-agent/internal/testkit"
	"github.com/lambda-agent/lambda-agent/internal/testkit/agentcoretest"
)

func newServer(t *testing.T) *agentcoretest.Server {
	t.Helper()
	srv := agentcoretest.NewServer()
	t.Cleanup(srv.Close)
	return srv
}

// noClientValidation takes the SDK's own check of required members out,
// so that a request without them reaches the server, whose answer is what
// the test is about.
func noClientValidation(o *bedrockagentcore.Options) {
	o.APIOptions = append(o.APIOptions, func(s *middleware.Stack) error {
		_, err := s.Initialize.Remove("OperationInputValidation")
		return err
	})
}

func text(role types.Role, s string) types.PayloadType {
	return &types.PayloadTypeMemberConversational{Value: types.Conversational{
		Content: &types.ContentMemberText{Value: s}, Role: role}}
}

var t0 = time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)

func createInput(actor, session string, at time.Time, payload ...types.PayloadType) *bedrockagentcore.CreateEventInput {
	return &bedrockagentcore.CreateEventInput{
		MemoryId: aws.String(agentcoretest.MemoryID), ActorId: aws.String(actor), SessionId: aws.String(session),
		EventTimestamp: aws.Time(at), Payload: payload,
	}
}

func texts(t *testing.T, events []types.Event) []string {
	t.Helper()
	var out []string
	for _, e := range events {
		for _, p := range e.Payload {
			switch p := p.(type) {
			case *types.PayloadTypeMemberConversational:
				c, ok := p.Value.Content.(*types.ContentMemberText)
				if !ok {
					t.Fatalf("content %T, want text", p.Value.Content)
				}
				out = append(out, string(p.Value.Role)+":"+c.Value)
			default:
				t.Fatalf("payload %T, want conversational", p)
			}
		}
	}
	return out
}

func TestCreateListDeleteEvents(t *testing.T) {
	srv := newServer(t)
	c := srv.Client()
	ctx := t.Context()
	var ids []string
	for i := range 5 {
		// Created out of order: ListEvents orders by eventTimestamp.
		at := t0.Add(time.Duration(4-i) * time.Second)
		out, err := c.CreateEvent(ctx, createInput("actor-1", "sess-1", at, text(types.RoleUser, fmt.Sprint("m", 4-i))))
		if err != nil {
			t.Fatalf("CreateEvent: %v", err)
		}
		e := out.Event
		if aws.ToString(e.ActorId) != "actor-1" || aws.ToString(e.SessionId) != "sess-1" || !aws.ToTime(e.EventTimestamp).Equal(at) ||
			aws.ToString(e.MemoryId) != agentcoretest.MemoryID {
			t.Errorf("event = %+v", e)
		}
		ids = append(ids, aws.ToString(e.EventId))
	}
	// Another session and actor are not listed.
	for _, in := range []*bedrockagentcore.CreateEventInput{
		createInput("actor-1", "sess-2", t0, text(types.RoleUser, "other session")),
		createInput("actor-2", "sess-1", t0, text(types.RoleUser, "other actor")),
	} {
		if _, err := c.CreateEvent(ctx, in); err != nil {
			t.Fatalf("CreateEvent: %v", err)
		}
	}

	var got []types.Event
	p := bedrockagentcore.NewListEventsPaginator(c, &bedrockagentcore.ListEventsInput{
		MemoryId: aws.String(agentcoretest.MemoryID), ActorId: aws.String("actor-1"), SessionId: aws.String("sess-1"),
		MaxResults: aws.Int32(2),
	})
	pages := 0
	for p.HasMorePages() {
		out, err := p.NextPage(ctx)
		if err != nil {
			t.Fatalf("ListEvents: %v", err)
		}
		if len(out.Events) > 2 {
			t.Errorf("page of %d events, want at most 2", len(out.Events))
		}
		got = append(got, out.Events...)
		pages++
	}
	if want := []string{"USER:m0", "USER:m1", "USER:m2", "USER:m3", "USER:m4"}; !cmp.Equal(texts(t, got), want) || pages != 3 {
		t.Errorf("listed %v in %d pages, want %v in 3", texts(t, got), pages, want)
	}

	// includePayloads false leaves the payloads out.
	out, err := c.ListEvents(ctx, &bedrockagentcore.ListEventsInput{
		MemoryId: aws.String(agentcoretest.MemoryID), ActorId: aws.String("actor-1"), SessionId: aws.String("sess-1"),
		IncludePayloads: aws.Bool(false),
	})
	if err != nil || len(out.Events) != 5 || len(out.Events[0].Payload) != 0 || out.NextToken != nil {
		t.Fatalf("ListEvents without payloads = %+v, %v", out, err)
	}

	// DeleteEvent removes one; deleting it again is ResourceNotFound.
	del := &bedrockagentcore.DeleteEventInput{MemoryId: aws.String(agentcoretest.MemoryID), ActorId: aws.String("actor-1"),
		SessionId: aws.String("sess-1"), EventId: aws.String(ids[0])}
	if d, err := c.DeleteEvent(ctx, del); err != nil || aws.ToString(d.EventId) != ids[0] {
		t.Fatalf("DeleteEvent = %v, %v", d, err)
	}
	var nf *types.ResourceNotFoundException
	if _, err := c.DeleteEvent(ctx, del); !errors.As(err, &nf) {
		t.Errorf("DeleteEvent again: %v, want *types.ResourceNotFoundException", err)
	}
	if got := srv.Events(agentcoretest.MemoryID, "actor-1", "sess-1"); len(got) != 4 {
		t.Errorf("Events after a delete: %d, want 4", len(got))
	}
}

func TestCreateEventIdempotency(t *testing.T) {
	srv := newServer(t)
	c := srv.Client()
	in := createInput("actor-1", "sess-1", t0, text(types.RoleUser, "hello"))
	in.ClientToken = aws.String("token-1")
	first, err := c.CreateEvent(t.Context(), in)
	if err != nil {
		t.Fatalf("CreateEvent: %v", err)
	}
	again, err := c.CreateEvent(t.Context(), in)
	if err != nil {
		t.Fatalf("CreateEvent with the same token: %v", err)
	}
	if aws.ToString(first.Event.EventId) != aws.ToString(again.Event.EventId) {
		t.Errorf("same token, same request: event %s then %s, want the same", aws.ToString(first.Event.EventId), aws.ToString(again.Event.EventId))
	}
	if n := len(srv.Events(agentcoretest.MemoryID, "actor-1", "sess-1")); n != 1 {
		t.Errorf("%d events stored, want 1", n)
	}

	changed := createInput("actor-1", "sess-1", t0, text(types.RoleUser, "something else"))
	changed.ClientToken = aws.String("token-1")
	_, err = c.CreateEvent(t.Context(), changed)
	var ve *types.ValidationException
	if !errors.As(err, &ve) || ve.Reason != types.ValidationExceptionReasonIdempotentParameterMismatchException {
		t.Errorf("same token, another request: %v, want a ValidationException with reason IdempotentParameterMismatchException", err)
	}

	// Without a token the SDK makes one per input: two inputs, two events.
	for range 2 {
		if _, err := c.CreateEvent(t.Context(), createInput("actor-1", "sess-1", t0, text(types.RoleUser, "hello"))); err != nil {
			t.Fatalf("CreateEvent: %v", err)
		}
	}
	if n := len(srv.Events(agentcoretest.MemoryID, "actor-1", "sess-1")); n != 3 {
		t.Errorf("%d events stored, want 3", n)
	}
	// The SDK writes the token it made into the input, so an input sent
	// twice is one event: a retry that reuses its input is idempotent.
	reused := createInput("actor-1", "sess-1", t0, text(types.RoleUser, "hello"))
	for range 2 {
		if _, err := c.CreateEvent(t.Context(), reused); err != nil {
			t.Fatalf("CreateEvent: %v", err)
		}
	}
	if n := len(srv.Events(agentcoretest.MemoryID, "actor-1", "sess-1")); n != 4 || reused.ClientToken == nil {
		t.Errorf("%d events stored, token %v; want 4 and the SDK's token in the input", n, reused.ClientToken)
	}
}

func TestEventRefusals(t *testing.T) {
	srv := newServer(t)
	c := srv.Client(noClientValidation)
	ok := func() *bedrockagentcore.CreateEventInput {
		return createInput("actor-1", "sess-1", t0, text(types.RoleUser, "hi"))
	}
	many := make([]types.PayloadType, agentcoretest.MaxPayloadItems+1)
	for i := range many {
		many[i] = text(types.RoleUser, "x")
	}
	tests := []struct {
		name   string
		call   func() error
		wantNF bool // ResourceNotFoundException, else ValidationException
	}{
		{"no actorId", func() error { in := ok(); in.ActorId = nil; _, err := c.CreateEvent(t.Context(), in); return err }, false},
		{"no sessionId", func() error { in := ok(); in.SessionId = nil; _, err := c.CreateEvent(t.Context(), in); return err }, false},
		{"no eventTimestamp", func() error {
			in := ok()
			in.EventTimestamp = nil
			_, err := c.CreateEvent(t.Context(), in)
			return err
		}, false},
		{"no payload", func() error { in := ok(); in.Payload = nil; _, err := c.CreateEvent(t.Context(), in); return err }, false},
		{"actorId with a colon", func() error {
			in := ok()
			in.ActorId = aws.String("iam:arn")
			_, err := c.CreateEvent(t.Context(), in)
			return err
		}, false},
		{"actorId starting with -", func() error {
			in := ok()
			in.ActorId = aws.String("-a")
			_, err := c.CreateEvent(t.Context(), in)
			return err
		}, false},
		{"actorId of 256", func() error {
			in := ok()
			in.ActorId = aws.String(strings.Repeat("a", 256))
			_, err := c.CreateEvent(t.Context(), in)
			return err
		}, false},
		{"sessionId with a slash", func() error {
			in := ok()
			in.SessionId = aws.String("a/b")
			_, err := c.CreateEvent(t.Context(), in)
			return err
		}, false},
		{"sessionId of 101", func() error {
			in := ok()
			in.SessionId = aws.String(strings.Repeat("s", 101))
			_, err := c.CreateEvent(t.Context(), in)
			return err
		}, false},
		{"memoryId not matching", func() error {
			in := ok()
			in.MemoryId = aws.String("not-a-memory")
			_, err := c.CreateEvent(t.Context(), in)
			return err
		}, false},
		{"unknown memory", func() error {
			in := ok()
			in.MemoryId = aws.String("othermemory-AbCdE01234")
			_, err := c.CreateEvent(t.Context(), in)
			return err
		}, true},
		{"text of 9001", func() error {
			_, err := c.CreateEvent(t.Context(), createInput("a", "s", t0, text(types.RoleUser, strings.Repeat("é", 9001))))
			return err
		}, false},
		{"empty text", func() error {
			_, err := c.CreateEvent(t.Context(), createInput("a", "s", t0, text(types.RoleUser, "")))
			return err
		}, false},
		{"unknown role", func() error {
			_, err := c.CreateEvent(t.Context(), createInput("a", "s", t0, text("SYSTEM", "x")))
			return err
		}, false},
		{"101 payload items", func() error { _, err := c.CreateEvent(t.Context(), createInput("a", "s", t0, many...)); return err }, false},
		{"ListEvents maxResults 0", func() error {
			_, err := c.ListEvents(t.Context(), &bedrockagentcore.ListEventsInput{MemoryId: aws.String(agentcoretest.MemoryID),
				ActorId: aws.String("a"), SessionId: aws.String("s"), MaxResults: aws.Int32(0)})
			return err
		}, false},
		{"ListEvents maxResults 101", func() error {
			_, err := c.ListEvents(t.Context(), &bedrockagentcore.ListEventsInput{MemoryId: aws.String(agentcoretest.MemoryID),
				ActorId: aws.String("a"), SessionId: aws.String("s"), MaxResults: aws.Int32(101)})
			return err
		}, false},
		{"ListEvents foreign nextToken", func() error {
			_, err := c.ListEvents(t.Context(), &bedrockagentcore.ListEventsInput{MemoryId: aws.String(agentcoretest.MemoryID),
				ActorId: aws.String("a"), SessionId: aws.String("s"), NextToken: aws.String("made-up")})
			return err
		}, false},
		{"ListEvents bad sessionId", func() error {
			_, err := c.ListEvents(t.Context(), &bedrockagentcore.ListEventsInput{MemoryId: aws.String(agentcoretest.MemoryID),
				ActorId: aws.String("a"), SessionId: aws.String("s.1")})
			return err
		}, false},
		{"DeleteEvent bad eventId", func() error {
			_, err := c.DeleteEvent(t.Context(), &bedrockagentcore.DeleteEventInput{MemoryId: aws.String(agentcoretest.MemoryID),
				ActorId: aws.String("a"), SessionId: aws.String("s"), EventId: aws.String("abc")})
			return err
		}, false},
		{"DeleteEvent unknown event", func() error {
			_, err := c.DeleteEvent(t.Context(), &bedrockagentcore.DeleteEventInput{MemoryId: aws.String(agentcoretest.MemoryID),
				ActorId: aws.String("a"), SessionId: aws.String("s"), EventId: aws.String("1#ab")})
			return err
		}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.call()
			var ve *types.ValidationException
			var nf *types.ResourceNotFoundException
			if tt.wantNF && !errors.As(err, &nf) || !tt.wantNF && !errors.As(err, &ve) {
				t.Errorf("err = %v (%T); want a typed %s", err, err, map[bool]string{true: "ResourceNotFoundException", false: "ValidationException"}[tt.wantNF])
			}
		})
	}
	if n := len(srv.Events(agentcoretest.MemoryID, "a", "s")); n != 0 {
		t.Errorf("%d events stored by refused requests", n)
	}
}

func TestRecords(t *testing.T) {
	srv := newServer(t)
	c := srv.Client()
	ctx := t.Context()
	add := func(ns, text string, age time.Duration) string {
		return srv.AddRecord(agentcoretest.MemoryID, agentcoretest.Record{Namespaces: []string{ns}, Text: text, CreatedAt: t0.Add(-age)})
	}
	tea := add("/users/a1/preferences", "Prefers green tea in the morning", 3*time.Hour)
	coffee := add("/users/a1/preferences", "Dislikes coffee", 2*time.Hour)
	add("/users/a1/facts", "Lives in Oslo and drinks tea", time.Hour)
	add("/users/a2/preferences", "Prefers tea too", 0)

	retrieve := func(in bedrockagentcore.RetrieveMemoryRecordsInput) []string {
		t.Helper()
		in.MemoryId = aws.String(agentcoretest.MemoryID)
		var ids []string
		p := bedrockagentcore.NewRetrieveMemoryRecordsPaginator(c, &in)
		for p.HasMorePages() {
			out, err := p.NextPage(ctx)
			if err != nil {
				t.Fatalf("RetrieveMemoryRecords: %v", err)
			}
			for _, s := range out.MemoryRecordSummaries {
				ids = append(ids, s.Content.(*types.MemoryContentMemberText).Value)
			}
		}
		return ids
	}
	// namespacePath takes whole segments below it; the score orders them.
	got := retrieve(bedrockagentcore.RetrieveMemoryRecordsInput{NamespacePath: aws.String("/users/a1"),
		SearchCriteria: &types.SearchCriteria{SearchQuery: aws.String("green tea")}, MaxResults: aws.Int32(1)})
	if want := []string{"Prefers green tea in the morning", "Lives in Oslo and drinks tea"}; !cmp.Equal(got, want) {
		t.Errorf("retrieve under /users/a1 = %q, want %q", got, want)
	}
	// namespace is exact; topK bounds the hits.
	got = retrieve(bedrockagentcore.RetrieveMemoryRecordsInput{Namespace: aws.String("/users/a1/preferences"),
		SearchCriteria: &types.SearchCriteria{SearchQuery: aws.String("tea coffee"), TopK: aws.Int32(1)}})
	if want := []string{"Dislikes coffee"}; !cmp.Equal(got, want) {
		t.Errorf("retrieve in /users/a1/preferences, top 1 = %q, want %q", got, want)
	}
	if got := retrieve(bedrockagentcore.RetrieveMemoryRecordsInput{Namespace: aws.String("/users/a"),
		SearchCriteria: &types.SearchCriteria{SearchQuery: aws.String("tea")}}); len(got) != 0 {
		t.Errorf("namespace /users/a matched %q; it is not a prefix match", got)
	}

	list, err := c.ListMemoryRecords(ctx, &bedrockagentcore.ListMemoryRecordsInput{MemoryId: aws.String(agentcoretest.MemoryID),
		Namespace: aws.String("/users/a1/preferences"), MaxResults: aws.Int32(1)})
	if err != nil || len(list.MemoryRecordSummaries) != 1 || list.NextToken == nil {
		t.Fatalf("ListMemoryRecords = %+v, %v; want one record and a nextToken", list, err)
	}

	got1, err := c.GetMemoryRecord(ctx, &bedrockagentcore.GetMemoryRecordInput{MemoryId: aws.String(agentcoretest.MemoryID), MemoryRecordId: aws.String(tea)})
	if err != nil || aws.ToString(got1.MemoryRecord.MemoryRecordId) != tea ||
		!cmp.Equal(got1.MemoryRecord.Namespaces, []string{"/users/a1/preferences"}) ||
		got1.MemoryRecord.Content.(*types.MemoryContentMemberText).Value != "Prefers green tea in the morning" {
		t.Errorf("GetMemoryRecord(%s) = %+v, %v", tea, got1, err)
	}
	var nf *types.ResourceNotFoundException
	if _, err := c.GetMemoryRecord(ctx, &bedrockagentcore.GetMemoryRecordInput{MemoryId: aws.String(agentcoretest.MemoryID),
		MemoryRecordId: aws.String("mem-missing")}); !errors.As(err, &nf) {
		t.Errorf("GetMemoryRecord of an unknown record: %v, want ResourceNotFoundException", err)
	}

	del, err := c.BatchDeleteMemoryRecords(ctx, &bedrockagentcore.BatchDeleteMemoryRecordsInput{MemoryId: aws.String(agentcoretest.MemoryID),
		Records: []types.MemoryRecordDeleteInput{{MemoryRecordId: aws.String(tea)}, {MemoryRecordId: aws.String(coffee)}, {MemoryRecordId: aws.String("mem-missing")}}})
	if err != nil {
		t.Fatalf("BatchDeleteMemoryRecords: %v", err)
	}
	if len(del.SuccessfulRecords) != 2 || len(del.FailedRecords) != 1 || del.FailedRecords[0].Status != types.MemoryRecordStatusFailed ||
		aws.ToInt32(del.FailedRecords[0].ErrorCode) != 404 {
		t.Errorf("BatchDeleteMemoryRecords = %+v", del)
	}
	if n := len(srv.Records(agentcoretest.MemoryID)); n != 2 {
		t.Errorf("%d records left, want 2", n)
	}
}

func TestRecordRefusals(t *testing.T) {
	srv := newServer(t)
	c := srv.Client(noClientValidation)
	mem := aws.String(agentcoretest.MemoryID)
	q := func(s string) *types.SearchCriteria { return &types.SearchCriteria{SearchQuery: aws.String(s)} }
	tests := []struct {
		name string
		call func() error
	}{
		{"no searchCriteria", func() error {
			_, err := c.RetrieveMemoryRecords(t.Context(), &bedrockagentcore.RetrieveMemoryRecordsInput{MemoryId: mem, Namespace: aws.String("/u")})
			return err
		}},
		{"no searchQuery", func() error {
			_, err := c.RetrieveMemoryRecords(t.Context(), &bedrockagentcore.RetrieveMemoryRecordsInput{MemoryId: mem, Namespace: aws.String("/u"),
				SearchCriteria: &types.SearchCriteria{}})
			return err
		}},
		{"searchQuery of 10001", func() error {
			_, err := c.RetrieveMemoryRecords(t.Context(), &bedrockagentcore.RetrieveMemoryRecordsInput{MemoryId: mem, Namespace: aws.String("/u"),
				SearchCriteria: q(strings.Repeat("q", 10001))})
			return err
		}},
		{"neither namespace nor namespacePath", func() error {
			_, err := c.RetrieveMemoryRecords(t.Context(), &bedrockagentcore.RetrieveMemoryRecordsInput{MemoryId: mem, SearchCriteria: q("x")})
			return err
		}},
		{"topK 0", func() error {
			_, err := c.RetrieveMemoryRecords(t.Context(), &bedrockagentcore.RetrieveMemoryRecordsInput{MemoryId: mem, Namespace: aws.String("/u"),
				SearchCriteria: &types.SearchCriteria{SearchQuery: aws.String("x"), TopK: aws.Int32(0)}})
			return err
		}},
		{"topK 101", func() error {
			_, err := c.RetrieveMemoryRecords(t.Context(), &bedrockagentcore.RetrieveMemoryRecordsInput{MemoryId: mem, Namespace: aws.String("/u"),
				SearchCriteria: &types.SearchCriteria{SearchQuery: aws.String("x"), TopK: aws.Int32(101)}})
			return err
		}},
		{"Retrieve maxResults 101", func() error {
			_, err := c.RetrieveMemoryRecords(t.Context(), &bedrockagentcore.RetrieveMemoryRecordsInput{MemoryId: mem, Namespace: aws.String("/u"),
				SearchCriteria: q("x"), MaxResults: aws.Int32(101)})
			return err
		}},
		{"List maxResults 0", func() error {
			_, err := c.ListMemoryRecords(t.Context(), &bedrockagentcore.ListMemoryRecordsInput{MemoryId: mem, Namespace: aws.String("/u"), MaxResults: aws.Int32(0)})
			return err
		}},
		{"List namespace of 1025", func() error {
			_, err := c.ListMemoryRecords(t.Context(), &bedrockagentcore.ListMemoryRecordsInput{MemoryId: mem, Namespace: aws.String(strings.Repeat("n", 1025))})
			return err
		}},
		{"BatchDelete no records", func() error {
			_, err := c.BatchDeleteMemoryRecords(t.Context(), &bedrockagentcore.BatchDeleteMemoryRecordsInput{MemoryId: mem})
			return err
		}},
		{"BatchDelete no memoryRecordId", func() error {
			_, err := c.BatchDeleteMemoryRecords(t.Context(), &bedrockagentcore.BatchDeleteMemoryRecordsInput{MemoryId: mem,
				Records: []types.MemoryRecordDeleteInput{{}}})
			return err
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var ve *types.ValidationException
			if err := tt.call(); !errors.As(err, &ve) {
				t.Errorf("err = %v (%T), want *types.ValidationException", err, err)
			}
		})
	}
	var nf *types.ResourceNotFoundException
	if _, err := c.ListMemoryRecords(t.Context(), &bedrockagentcore.ListMemoryRecordsInput{MemoryId: aws.String("othermemory-AbCdE01234"),
		Namespace: aws.String("/u")}); !errors.As(err, &nf) {
		t.Errorf("unknown memory: %v, want *types.ResourceNotFoundException", err)
	}
}

func TestFaults(t *testing.T) {
	srv := newServer(t)
	c := srv.Client()
	in := createInput("a", "s", t0, text(types.RoleUser, "hi"))
	srv.FailNext("CreateEvent", 1, agentcoretest.Throttled)
	srv.FailNext("", 1, agentcoretest.Unavailable)
	srv.FailNext("CreateEvent", 1, agentcoretest.Throttling)
	srv.FailNext("CreateEvent", 1, agentcoretest.Internal)

	var throttled *types.ThrottledException
	var unavailable *types.ServiceUnavailableException
	var throttling *types.ThrottlingException
	var internal *types.ServiceException
	checks := []struct {
		target any
		status int
	}{{&throttled, 429}, {&unavailable, 503}, {&throttling, 429}, {&internal, 500}}
	for i, chk := range checks {
		_, err := c.CreateEvent(t.Context(), in)
		var re *awshttp.ResponseError
		if !errors.As(err, chk.target) || !errors.As(err, &re) || re.HTTPStatusCode() != chk.status {
			t.Errorf("call %d: %v, want %T with status %d", i+1, err, chk.target, chk.status)
		}
	}
	if _, err := c.CreateEvent(t.Context(), in); err != nil {
		t.Fatalf("after the faults: %v", err)
	}
	if n := len(srv.Events(agentcoretest.MemoryID, "a", "s")); n != 1 || srv.Calls("CreateEvent") != 5 {
		t.Errorf("%d events after 4 faults and a success, %d calls; want 1 and 5", n, srv.Calls("CreateEvent"))
	}
}

// TestEndpointFromEnvironment reaches the server as a function would: the
// default configuration with AWS_ENDPOINT_URL_BEDROCK_AGENTCORE, and a
// signed request (an unsigned one is refused).
func TestEndpointFromEnvironment(t *testing.T) {
	srv := newServer(t)
	cfg := testkit.DefaultAWSConfig(t, "eu-west-1", map[string]string{"AWS_ENDPOINT_URL_BEDROCK_AGENTCORE": srv.URL})
	c := bedrockagentcore.NewFromConfig(cfg)
	if _, err := c.CreateEvent(t.Context(), createInput("a", "s", t0, text(types.RoleUser, "hi"))); err != nil {
		t.Fatalf("CreateEvent: %v", err)
	}
	resp, err := http.Post(srv.URL+"/memories/"+agentcoretest.MemoryID+"/events", "application/json", strings.NewReader("{}"))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || resp.Header.Get("X-Amzn-Errortype") != "MissingAuthenticationTokenException" {
		t.Errorf("unsigned request: %d %s, want 403 MissingAuthenticationTokenException", resp.StatusCode, resp.Header.Get("X-Amzn-Errortype"))
	}
}

// TestHook: a hook sees each request with its body, may answer a fault in
// its place, which changes nothing, and may hold it; a held request whose
// client gives up is dropped unserved.
func TestHook(t *testing.T) {
	srv := newServer(t)
	c := srv.Client()
	in := createInput("a", "s", t0, text(types.RoleUser, "hi"))
	var mu sync.Mutex // the hook runs on the server's goroutines
	var seen []string
	srv.SetHook(func(op string, r *http.Request) agentcoretest.Fault {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, op+" "+string(body))
		return agentcoretest.Unavailable
	})
	var unavailable *types.ServiceUnavailableException
	if _, err := c.CreateEvent(t.Context(), in); !errors.As(err, &unavailable) {
		t.Fatalf("CreateEvent with a hook answering 503: %v", err)
	}
	mu.Lock()
	if len(seen) != 1 || !strings.HasPrefix(seen[0], "CreateEvent {") || !strings.Contains(seen[0], `"hi"`) {
		t.Errorf("the hook saw %q", seen)
	}
	mu.Unlock()

	arrived := make(chan struct{})
	srv.SetHook(func(op string, r *http.Request) agentcoretest.Fault {
		close(arrived)
		<-r.Context().Done()
		return 0
	})
	ctx, cancel := context.WithCancel(t.Context())
	go func() { <-arrived; cancel() }()
	if _, err := c.CreateEvent(ctx, in); !errors.Is(err, context.Canceled) {
		t.Fatalf("a held CreateEvent given up: %v", err)
	}
	srv.SetHook(nil)
	// The server notices the client went away, and serves nothing.
	time.Sleep(50 * time.Millisecond)
	if n := len(srv.Events(agentcoretest.MemoryID, "a", "s")); n != 0 {
		t.Errorf("%d events after a refused and a dropped request", n)
	}
	if _, err := c.CreateEvent(t.Context(), in); err != nil || len(srv.Events(agentcoretest.MemoryID, "a", "s")) != 1 {
		t.Errorf("without the hook: %v", err)
	}
}

// TestRecordContent: a record's Content goes on the wire in place of its
// text; a member the SDK does not know reaches the caller as no content
// it can read.
func TestRecordContent(t *testing.T) {
	srv := newServer(t)
	srv.AddRecord(agentcoretest.MemoryID, agentcoretest.Record{Namespaces: []string{"/users/a1/facts"}, Text: "tea",
		Content: json.RawMessage(`{"image":{"format":"png"}}`)})
	out, err := srv.Client().RetrieveMemoryRecords(t.Context(), &bedrockagentcore.RetrieveMemoryRecordsInput{
		MemoryId: aws.String(agentcoretest.MemoryID), NamespacePath: aws.String("/users/a1"),
		SearchCriteria: &types.SearchCriteria{SearchQuery: aws.String("tea")},
	})
	if err != nil || len(out.MemoryRecordSummaries) != 1 {
		t.Fatalf("RetrieveMemoryRecords: %v %+v", err, out)
	}
	switch c := out.MemoryRecordSummaries[0].Content.(type) {
	case nil:
	case *types.UnknownUnionMember:
		if c.Tag != "image" {
			t.Errorf("content %#v; want the member image", c)
		}
	default:
		t.Errorf("content %#v; want none the SDK knows", c)
	}
}

package agentcore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/bedrockagentcore"
	"github.com/aws/aws-sdk-go-v2/service/bedrockagentcore/types"
	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/ddbhistory"
	"github.com/lambda-agent/lambda-agent/internal/memory"
	"golang.org/x/sync/errgroup"
)

// Counter gets the counts of each batch the mirror handles:
// *telemetry.Metrics.
type Counter interface {
	Counts(ctx context.Context, counts map[string]int)
}

// The metrics of a batch, besides memory.MetricRecords and
// memory.MetricFailed.
const (
	MetricEvents         = "AgentCoreEvents"
	MetricEventsDeleted  = "AgentCoreEventsDeleted"
	MetricRecordsDeleted = "AgentCoreRecordsDeleted"
)

// Mirror mirrors committed turns into AgentCore Memory, from the sessions
// table's stream: the memory function's handler when AGENTCORE_MEMORY_ID
// is set. A mirror that fails never fails a turn, which committed before;
// its stream record is retried, and the batch bisected and finally sent
// to the on-failure destination, as the event source mapping says. It is
// safe for concurrent use.
type Mirror struct {
	Memory *Memory
	// Sessions reads the messages of a commit.
	Sessions memory.CommitReader
	// Logger gets a line for each record that fails; nil means
	// slog.Default().
	Logger *slog.Logger
	// Metrics, when set, gets each batch's counts.
	Metrics Counter
}

// The metadata of a mirrored event: which of our messages it holds.
const (
	metaSession     = "lambda_agent.session"
	metaIncarnation = "lambda_agent.incarnation"
	metaVersion     = "lambda_agent.version"
	metaMessage     = "lambda_agent.message"
)

// concurrency bounds a record's calls in flight.
const concurrency = 8

// tally counts a batch's work.
type tally struct{ events, eventsDeleted, recordsDeleted atomic.Int64 }

// Handle handles a batch of stream records in order, and reports the
// first that failed (memory.Batch).
func (m *Mirror) Handle(ctx context.Context, ev events.DynamoDBEvent) (events.DynamoDBEventResponse, error) {
	var t tally
	resp := memory.Batch(ctx, ev, func(ctx context.Context, r events.DynamoDBEventRecord) error {
		return m.record(ctx, r, &t)
	}, m.Logger)
	if m.Metrics != nil {
		m.Metrics.Counts(ctx, map[string]int{
			memory.MetricRecords: len(ev.Records),
			memory.MetricFailed:  len(resp.BatchItemFailures),
			MetricEvents:         int(t.events.Load()),
			MetricEventsDeleted:  int(t.eventsDeleted.Load()),
			MetricRecordsDeleted: int(t.recordsDeleted.Load()),
		})
	}
	return resp, nil
}

// record mirrors one stream record: a commit's new messages become
// events, messages a commit took away lose theirs, and a forget marker
// deletes the owner's records. Any other record, and one of an owner
// without memory, is skipped.
func (m *Mirror) record(ctx context.Context, r events.DynamoDBEventRecord, t *tally) error {
	if r.EventName == string(events.DynamoDBOperationTypeInsert) || r.EventName == string(events.DynamoDBOperationTypeModify) {
		if owner, _, ok := memory.ForgottenBy(memory.Image(r.Change.NewImage)); ok {
			if !m.Memory.Has(owner) {
				return nil
			}
			return m.forget(ctx, owner, t)
		}
	}
	c, ok := memory.ChangeOf(r)
	if !ok || !m.Memory.Has(c.Session.Owner) {
		return nil
	}
	if c.Discard {
		if err := m.deleteEvents(ctx, c, t); err != nil {
			return err
		}
	}
	if c.Add {
		return m.mirror(ctx, c, t)
	}
	return nil
}

// event is one CreateEvent of a commit.
type event struct {
	message int
	part    string // "text" or "tools", and the event's number among them
	skip    bool   // tool chatter: no long-term extraction
	payload []types.PayloadType
}

// mirror writes the messages c added as events. Each is created with a
// clientToken derived from the commit and its place in it, so that a
// retried record creates nothing twice, and with a timestamp between the
// session's previous commit and this one, one millisecond apart at the
// end of that span, so that AgentCore lists a session's commits in order,
// and a commit's events in order. When there are more of them than
// milliseconds since the previous commit, the first share one timestamp,
// and are created one after another.
func (m *Mirror) mirror(ctx context.Context, c memory.Change, t *tally) error {
	im := c.Session
	msgs, err := m.Sessions.CommittedMessages(ctx, im, c.From, im.Count)
	if err != nil {
		return err
	}
	var evs []event
	for _, i := range slices.Sorted(maps.Keys(msgs)) {
		evs = append(evs, eventsOf(i, msgs[i])...)
	}
	actor, session := ActorID(im.Owner), SessionID(im.ID)
	create := func(ctx context.Context, n int) error {
		e := evs[n]
		in := &bedrockagentcore.CreateEventInput{
			MemoryId:       aws.String(m.Memory.cfg.MemoryID),
			ActorId:        aws.String(actor),
			SessionId:      aws.String(session),
			EventTimestamp: aws.Time(stamp(c, n, len(evs))),
			Payload:        e.payload,
			ClientToken:    aws.String(clientToken(m.Memory.cfg.MemoryID, actor, session, im, e)),
			Metadata: map[string]types.MetadataValue{
				metaSession:     &types.MetadataValueMemberStringValue{Value: im.ID},
				metaIncarnation: &types.MetadataValueMemberStringValue{Value: im.Incarnation},
				metaVersion:     &types.MetadataValueMemberStringValue{Value: strconv.FormatInt(im.Version, 10)},
				metaMessage:     &types.MetadataValueMemberStringValue{Value: strconv.Itoa(e.message)},
			},
		}
		if e.skip {
			in.ExtractionMode = types.ExtractionModeSkip
		}
		if _, err := m.Memory.client.CreateEvent(ctx, in); err != nil {
			return fmt.Errorf("agentcore: mirror message %d of %s: %w", e.message, im.ID, err)
		}
		t.events.Add(1)
		return nil
	}
	// Events that share a timestamp are created one after another, in
	// order; the rest, each of a time of its own, at once.
	tied := 1
	for tied < len(evs) && stamp(c, tied, len(evs)).Equal(stamp(c, 0, len(evs))) {
		tied++
	}
	for n := range min(tied, len(evs)) {
		if err := create(ctx, n); err != nil {
			return err
		}
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(concurrency)
	for n := tied; n < len(evs); n++ {
		g.Go(func() error { return create(gctx, n) })
	}
	return g.Wait()
}

// stamp is the timestamp of the nth of a commit's count events: in the
// last count milliseconds up to the commit's time, and after the previous
// commit's. A record delivered again stamps each event as it did.
func stamp(c memory.Change, n, count int) time.Time {
	at := c.Session.UpdatedAt.Add(time.Duration(n-count+1) * time.Millisecond)
	if first := c.Previous.Add(time.Millisecond); !c.Previous.IsZero() && at.Before(first) {
		return first
	}
	return at
}

// clientToken is a CreateEvent's idempotency token: the SHA-256 of the
// event's place, the commit that made it included, in hex.
func clientToken(memoryID, actor, session string, im ddbhistory.SessionImage, e event) string {
	sum := sha256.Sum256(fmt.Appendf(nil, "%s\x00%s\x00%s\x00%s\x00%d\x00%d\x00%s",
		memoryID, actor, session, im.Incarnation, im.Version, e.message, e.part))
	return hex.EncodeToString(sum[:])
}

// eventsOf is message i as events: its words in conversational payloads
// (USER or ASSISTANT), which strategies extract from, and its tool calls
// and results apart, as TOOL payloads that they skip. Text longer than a
// payload's limit is split; a payload list longer than an event's limit
// goes on in another event. Media and reasoning are left out.
func eventsOf(i int, msg agent.Message) []event {
	role := types.RoleUser
	if msg.Role == agent.RoleAssistant {
		role = types.RoleAssistant
	}
	var words, tools []string
	for _, b := range msg.Content {
		switch {
		case b.Text != "":
			words = append(words, b.Text)
		case b.ToolUse != nil:
			tools = append(tools, toolJSON(map[string]any{"toolUse": map[string]any{"name": b.ToolUse.Name, "input": b.ToolUse.Input}}))
		case b.ToolResult != nil:
			var content []any
			for _, c := range b.ToolResult.Content {
				switch {
				case c.Text != "":
					content = append(content, map[string]string{"text": c.Text})
				case len(c.JSON) > 0:
					content = append(content, map[string]json.RawMessage{"json": c.JSON})
				}
			}
			tools = append(tools, toolJSON(map[string]any{"toolResult": map[string]any{"status": b.ToolResult.Status, "content": content}}))
		}
	}
	out := split(i, "text", role, strings.Join(words, "\n"), false)
	return append(out, split(i, "tools", types.RoleTool, strings.Join(tools, "\n"), true)...)
}

func toolJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return "" // raw JSON the session stored is valid JSON
	}
	return string(b)
}

// split is text as events of role, each of at most maxPayload payloads of
// at most maxText characters.
func split(i int, kind string, role types.Role, text string, skip bool) []event {
	var out []event
	rs := []rune(text)
	for len(rs) > 0 {
		e := event{message: i, part: fmt.Sprintf("%s.%d", kind, len(out)), skip: skip}
		for len(rs) > 0 && len(e.payload) < maxPayload {
			n := min(len(rs), maxText)
			e.payload = append(e.payload, &types.PayloadTypeMemberConversational{Value: types.Conversational{
				Role: role, Content: &types.ContentMemberText{Value: string(rs[:n])}}})
			rs = rs[n:]
		}
		out = append(out, e)
	}
	return out
}

// deleteEvents deletes the events of the messages c discards (discarded).
// Events of c's own commit, and of a session made again under its id
// since, stay, so that a record delivered again does not delete what was
// mirrored after it, which the clientTokens would not let it create again.
// It lists them all before it deletes any, so that the pages it reads do
// not move under it.
func (m *Mirror) deleteEvents(ctx context.Context, c memory.Change, t *tally) error {
	actor, session := ActorID(c.Session.Owner), SessionID(c.Session.ID)
	in := &bedrockagentcore.ListEventsInput{
		MemoryId: aws.String(m.Memory.cfg.MemoryID), ActorId: aws.String(actor), SessionId: aws.String(session),
		IncludePayloads: aws.Bool(false), MaxResults: aws.Int32(maxResults),
	}
	var ids []string
	for p := bedrockagentcore.NewListEventsPaginator(m.Memory.client, in); p.HasMorePages(); {
		out, err := p.NextPage(ctx)
		if err != nil {
			return fmt.Errorf("agentcore: list events of %s: %w", c.Session.ID, err)
		}
		for _, e := range out.Events {
			if discarded(e.Metadata, c) {
				ids = append(ids, aws.ToString(e.EventId))
			}
		}
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(concurrency)
	for _, id := range ids {
		g.Go(func() error {
			_, err := m.Memory.client.DeleteEvent(gctx, &bedrockagentcore.DeleteEventInput{
				MemoryId: aws.String(m.Memory.cfg.MemoryID), ActorId: aws.String(actor), SessionId: aws.String(session), EventId: aws.String(id)})
			var nf *types.ResourceNotFoundException
			if err != nil && !errors.As(err, &nf) {
				return fmt.Errorf("agentcore: delete event of %s: %w", c.Session.ID, err)
			}
			t.eventsDeleted.Add(1)
			return nil
		})
	}
	return g.Wait()
}

// discarded says whether an event of md mirrored a message that c
// discards: one of c's incarnation from c.DiscardFrom on, written by an
// earlier commit than c's, when c's is that incarnation's. An event
// without our metadata is not ours to judge, and stays.
func discarded(md map[string]types.MetadataValue, c memory.Change) bool {
	value := func(key string) (string, bool) {
		v, ok := md[key].(*types.MetadataValueMemberStringValue)
		if !ok {
			return "", false
		}
		return v.Value, true
	}
	inc, ok1 := value(metaIncarnation)
	msg, ok2 := value(metaMessage)
	ver, ok3 := value(metaVersion)
	i, err1 := strconv.Atoi(msg)
	v, err2 := strconv.ParseInt(ver, 10, 64)
	if !ok1 || !ok2 || !ok3 || err1 != nil || err2 != nil {
		return false
	}
	return inc == c.DiscardIncarnation && i >= c.DiscardFrom && (inc != c.Session.Incarnation || v < c.Session.Version)
}

// forget deletes every record under owner's namespace path: a forget-all.
// It lists them all before it deletes any.
func (m *Mirror) forget(ctx context.Context, owner string, t *tally) error {
	in := &bedrockagentcore.ListMemoryRecordsInput{
		MemoryId: aws.String(m.Memory.cfg.MemoryID), NamespacePath: aws.String(m.Memory.cfg.NamespacePath(owner)),
		MaxResults: aws.Int32(maxResults),
	}
	var ids []string
	for p := bedrockagentcore.NewListMemoryRecordsPaginator(m.Memory.client, in); p.HasMorePages(); {
		out, err := p.NextPage(ctx)
		if err != nil {
			return fmt.Errorf("agentcore: forget: list records: %w", err)
		}
		for _, s := range out.MemoryRecordSummaries {
			if s.MemoryRecordId != nil && m.Memory.owns(owner, s.Namespaces) {
				ids = append(ids, *s.MemoryRecordId)
			}
		}
	}
	for batch := range slices.Chunk(ids, maxResults) {
		n, err := m.Memory.deleteRecords(ctx, batch)
		if err != nil {
			return fmt.Errorf("agentcore: forget: %w", err)
		}
		t.recordsDeleted.Add(int64(n))
	}
	return nil
}

package ddbhistory

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/lambda-agent/lambda-agent/internal/agent"
	"golang.org/x/sync/errgroup"
)

// Page is one page of a session's transcript.
type Page struct {
	// Session is the session item: Conversation.Window and .State are set,
	// Conversation.Messages is not.
	Session *Session
	// Messages are the page's messages, oldest first. A message that has
	// expired is left out.
	Messages []agent.Message
	// First is the index of the first of Messages. Messages that expired,
	// which are always a session's oldest, are left out.
	First int
	// NextCursor continues the transcript; empty on the last page.
	NextCursor string
	// Agent, on a page of a sub-agent's transcript (AgentTranscript), is
	// that conversation's item: its Count, and its Conversation's Window
	// and State; its Conversation.Messages is not set. Session is still
	// the session item.
	Agent *AgentConversation
}

// Bounds on a transcript page: messages, and bytes of message JSON, which
// keeps a page well within Lambda's 6 MB response limit.
const (
	MaxPageSize  = 1000
	MaxPageBytes = 4 << 20
)

// Transcript reads the full transcript of a session, oldest first, limit
// messages at a time. cursor is "" for the first page and a Page's NextCursor
// for the next. It returns ErrInvalid for a malformed cursor or limit.
func (s *Store) Transcript(ctx context.Context, key Key, cursor string, limit int) (*Page, error) {
	return s.transcript(ctx, key, mainKeys, cursor, limit)
}

// AgentTranscript reads the transcript of the conversation a session
// keeps for its sub-agent name, as Transcript reads the main agent's:
// oldest first, limit messages at a time, in pages of the same bounds. A
// sub-agent that has none yet, or whose conversation expired, has an
// empty one. The session must be live, as for Transcript: ErrNotFound
// otherwise. A name that cannot name a sub-agent is ErrInvalid.
func (s *Store) AgentTranscript(ctx context.Context, key Key, name, cursor string, limit int) (*Page, error) {
	if err := validAgentName(name); err != nil {
		return nil, err
	}
	return s.transcript(ctx, key, agentKeys(name), cursor, limit)
}

// transcript reads a page of the transcript of the conversation in
// keyspace ks.
func (s *Store) transcript(ctx context.Context, key Key, ks keyspace, cursor string, limit int) (*Page, error) {
	if err := key.validate(); err != nil {
		return nil, err
	}
	if limit < 1 || limit > MaxPageSize {
		return nil, invalidArgument("limit %d is not between 1 and %d", limit, MaxPageSize)
	}
	from, err := decodeCursor(cursor)
	if err != nil {
		return nil, err
	}
	// A read beside a commit that rewrote messages is made again; see
	// messageSet.current.
	for attempt := 0; ; attempt++ {
		page, err := s.transcriptPage(ctx, key, ks, from, limit, attempt == 2)
		if !errors.Is(err, errUnseen) {
			return page, err
		}
	}
}

// Tail reads the last n messages of a session, at most, with the session
// item: the end of its transcript, which one request reads whenever those
// messages are stored in no more than n items, however long the session.
// As in Transcript, messages that expired are left out; so is any message
// before one that cannot be read, since the tail is the longest run of
// readable messages that ends with the newest. It returns ErrInvalid for n
// outside 1 to MaxPageSize, and ErrNotFound for a session that does not
// exist, has expired or is being deleted.
func (s *Store) Tail(ctx context.Context, key Key, n int) (*Page, error) {
	if err := key.validate(); err != nil {
		return nil, err
	}
	if n < 1 || n > MaxPageSize {
		return nil, invalidArgument("n %d is not between 1 and %d", n, MaxPageSize)
	}
	fromOf := func(sess *Session) int { return max(sess.Count-n, 0) }
	sess, msgs, first, err := s.readNewestSettled(ctx, key, mainKeys, n, fromOf)
	if errors.Is(err, ErrDeleting) {
		err = ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("ddbhistory: tail %s: %w", key.ID, err)
	}
	return &Page{Session: sess, Messages: msgs, First: first}, nil
}

// transcriptPage reads one page for transcript: the session item, and
// the messages of the conversation in keyspace ks, with its conversation
// item for a sub-agent's. A message that is not current is errUnseen,
// unless last: the last attempt leaves it out.
func (s *Store) transcriptPage(ctx context.Context, key Key, ks keyspace, from, limit int, last bool) (*Page, error) {
	pk := partitionKey(key)
	now := s.cfg.Now()
	var (
		meta, agentMeta item
		msgs            = newMessageSet(ks)
	)
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() (err error) {
		meta, err = s.getItem(gctx, pk, skMeta)
		return err
	})
	if ks != mainKeys {
		g.Go(func() (err error) {
			agentMeta, err = s.getItem(gctx, pk, ks.meta())
			return err
		})
	}
	g.Go(func() error {
		items, err := s.queryMessages(gctx, pk, ks, from, min(from+limit, maxIndex+1))
		msgs.add(items, now)
		return err
	})
	if err := g.Wait(); err != nil {
		return nil, fmt.Errorf("ddbhistory: transcript %s: %w", key.ID, err)
	}
	if sessionState(meta, now) != stateLive {
		return nil, fmt.Errorf("ddbhistory: transcript %s: %w", key.ID, ErrNotFound)
	}
	sess, err := decodeMeta(key, meta, now)
	if err != nil {
		return nil, fmt.Errorf("ddbhistory: transcript %s: %w", key.ID, err)
	}
	page := &Page{Session: sess, First: from}
	// conv is the conversation whose messages the page holds: the session
	// item counts the main agent's, a sub-agent's own item its.
	conv := sess
	if ks != mainKeys {
		conv = &Session{Key: key}
		if agentMeta != nil && !expired(agentMeta, now) {
			if conv, err = decodeMeta(key, agentMeta, now); err != nil {
				return nil, fmt.Errorf("ddbhistory: transcript %s: agent %s: %w", key.ID, ks.name(), err)
			}
		}
		// A conversation a later commit wrote than the session item read
		// is read again, so that a page's two items are of one version of
		// the session, as an export's pages need.
		if conv.written > sess.Version && !last {
			return nil, errUnseen
		}
		page.Agent = &AgentConversation{Name: ks.name(), Count: conv.Count, Conversation: agent.Conversation{Window: conv.Conversation.Window, State: conv.Conversation.State}}
	}
	end, size := min(from+limit, conv.Count), 0
	for i := from; i < end; i++ {
		if !msgs.current(i, conv) {
			if !last {
				return nil, errUnseen
			}
			continue
		}
		if !msgs.complete(i) {
			if msgs.expired[i] || i == from {
				continue // absent; the first of a page is skipped so pages move on
			}
			// Counted by the session item but not seen by the query, which
			// ran beside a commit: the page ends here, and the next starts
			// with it.
			end = i
			break
		}
		m, n, err := msgs.found[i].decodeSized()
		if err != nil {
			continue
		}
		// Keep a page within Lambda's 6 MB response, whatever the messages.
		if len(page.Messages) > 0 && size+n > MaxPageBytes {
			end = i
			break
		}
		size += n
		if len(page.Messages) == 0 {
			page.First = i
		}
		page.Messages = append(page.Messages, m)
	}
	if end < conv.Count {
		page.NextCursor = encodeCursor(end)
	}
	return page, nil
}

// CursorAt returns the cursor of the transcript page that starts at message
// index i, such as the first message of a turn that Replay locates.
func CursorAt(i int) string { return encodeCursor(i) }

// maxIndex is the highest message index a sort key can hold.
const maxIndex = 1e10 - 1

// Cursors are opaque to callers; inside they are the next message index.
func encodeCursor(i int) string {
	return base64.RawURLEncoding.EncodeToString([]byte(strconv.Itoa(i)))
}

// decodeCursor reverses encodeCursor, refusing a malformed cursor.
func decodeCursor(c string) (int, error) {
	if c == "" {
		return 0, nil
	}
	raw, err := base64.RawURLEncoding.DecodeString(c)
	if err == nil {
		if i, err := strconv.Atoi(string(raw)); err == nil && i >= 0 && len(raw) <= indexDigits {
			return i, nil
		}
	}
	return 0, invalidArgument("malformed cursor %q", c)
}

// queryAll runs a query to its last page.
func (s *Store) queryAll(ctx context.Context, in *dynamodb.QueryInput) ([]item, error) {
	var items []item
	for {
		out, err := s.client.Query(ctx, in, s.retries)
		if err != nil {
			return nil, s.classify(err)
		}
		items = append(items, out.Items...)
		if out.LastEvaluatedKey == nil {
			return items, nil
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
}

// queryMessages reads, strongly consistently, the items of the messages
// from to to-1 of the conversation in keyspace ks of partition pk, parts
// included: the indexes are dense, so they are an exact key range, and a
// message's parts sort after it, below the next message. With attrs, only
// those attributes are read.
func (s *Store) queryMessages(ctx context.Context, pk string, ks keyspace, from, to int, attrs ...string) ([]item, error) {
	in := &dynamodb.QueryInput{
		TableName:                 aws.String(s.cfg.Table),
		KeyConditionExpression:    aws.String("#pk = :pk AND #sk BETWEEN :lo AND :hi"),
		ExpressionAttributeNames:  map[string]string{"#pk": PartitionKey, "#sk": SortKey},
		ExpressionAttributeValues: item{":pk": str(pk), ":lo": str(ks.message(from)), ":hi": str(ks.last(to - 1))},
		ConsistentRead:            aws.Bool(true),
	}
	if len(attrs) > 0 {
		refs := make([]string, len(attrs))
		for i, a := range attrs {
			refs[i] = fmt.Sprintf("#a%d", i)
			in.ExpressionAttributeNames[refs[i]] = a
		}
		in.ProjectionExpression = aws.String(strings.Join(refs, ", "))
	}
	return s.queryAll(ctx, in)
}

// WindowBefore reads the messages a window that ends before message to
// holds, when it starts at message from: the longest run of sess's stored
// messages ending with message to-1, as Load reads a window. It returns the
// messages and the index of the first. A rewind that discards messages a
// summary covered restarts the window with it (see Turn.Rewind).
func (s *Store) WindowBefore(ctx context.Context, sess *Session, from, to int) ([]agent.Message, int, error) {
	if err := sess.validate(); err != nil {
		return nil, 0, err
	}
	if from < 0 || from > to || to > sess.Count {
		return nil, 0, invalidArgument("messages %d to %d of %d", from, to, sess.Count)
	}
	if from == to {
		return nil, to, nil
	}
	items, err := s.queryMessages(ctx, partitionKey(sess.Key), mainKeys, from, to)
	if err != nil {
		return nil, 0, fmt.Errorf("ddbhistory: read %s: %w", sess.ID, err)
	}
	msgs := newMessageSet(mainKeys)
	msgs.add(items, s.cfg.Now())
	// A message written since sess was read ends the run there: the
	// session has moved on, and a commit from sess will conflict anyway.
	upTo := *sess
	upTo.Count = to
	window, start, err := msgs.window(from, &upTo, true)
	if err != nil {
		return nil, 0, fmt.Errorf("ddbhistory: read %s: %w", sess.ID, err)
	}
	return window, start, nil
}

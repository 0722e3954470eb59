package ddbhistory

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/lambda-agent/lambda-agent/internal/agent"
	"golang.org/x/sync/errgroup"
)

// DynamoDBAPI is the part of *dynamodb.Client that the store uses.
type DynamoDBAPI interface {
	GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
	Query(context.Context, *dynamodb.QueryInput, ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
	TransactWriteItems(context.Context, *dynamodb.TransactWriteItemsInput, ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
	UpdateItem(context.Context, *dynamodb.UpdateItemInput, ...func(*dynamodb.Options)) (*dynamodb.UpdateItemOutput, error)
	DeleteItem(context.Context, *dynamodb.DeleteItemInput, ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
	PutItem(context.Context, *dynamodb.PutItemInput, ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
}

// Config configures a Store. Zero values mean the documented defaults.
type Config struct {
	// Table is the sessions table. Required.
	Table string
	// TTL is how long a message is kept after it is written, and how long a
	// session lives after its last commit. Zero keeps everything forever.
	TTL time.Duration
	// IdempotencyTTL is how long a turn's response is kept for replays;
	// 0 means DefaultIdempotencyTTL.
	IdempotencyTTL time.Duration
	// WindowHint is how many messages Load reads in its first request; a
	// longer window takes a second. 0 means DefaultWindowHint.
	WindowHint int
	// MaxAttempts is how many times the SDK tries a throttled or failed
	// request; 0 means DefaultMaxAttempts.
	MaxAttempts int
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Defaults for Config.
const (
	DefaultIdempotencyTTL = 24 * time.Hour
	// DefaultWindowHint is a sliding window of agent.DefaultWindowSize
	// messages, plus the turn's input and answer.
	DefaultWindowHint  = 42
	DefaultMaxAttempts = 5
)

// Store keeps sessions in DynamoDB. It is safe for concurrent use.
type Store struct {
	client DynamoDBAPI
	cfg    Config
}

// New returns a Store, or an error that says what is wrong with cfg.
func New(client DynamoDBAPI, cfg Config) (*Store, error) {
	switch {
	case client == nil:
		return nil, errors.New("ddbhistory: nil client")
	case cfg.Table == "":
		return nil, errors.New("ddbhistory: Table is required")
	case cfg.TTL < 0 || cfg.IdempotencyTTL < 0 || cfg.WindowHint < 0 || cfg.MaxAttempts < 0:
		return nil, errors.New("ddbhistory: negative value in Config")
	}
	cfg.IdempotencyTTL = cmp.Or(cfg.IdempotencyTTL, DefaultIdempotencyTTL)
	cfg.WindowHint = cmp.Or(cfg.WindowHint, DefaultWindowHint)
	cfg.MaxAttempts = cmp.Or(cfg.MaxAttempts, DefaultMaxAttempts)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Store{client: client, cfg: cfg}, nil
}

// retries sets the SDK's attempts for one call.
func (s *Store) retries(o *dynamodb.Options) { o.RetryMaxAttempts = s.cfg.MaxAttempts }

// Key names a session: its owner, the caller's identity, and its id.
type Key struct {
	Owner string
	ID    string
}

// idPattern and MaxIDBytes are what a session id may be: 1 to 128
// characters of [A-Za-z0-9._:-], the first a letter or digit. The length
// is checked apart: a counted repetition, {0,127}, compiles to a program
// whose size costs the functions' cold start.
var idPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:-]*$`)

// MaxIDBytes bounds a session id.
const MaxIDBytes = 128

// ValidID reports whether id can name a session.
func ValidID(id string) bool { return len(id) <= MaxIDBytes && idPattern.MatchString(id) }

// validate refuses a key that cannot name a session.
func (k Key) validate() error {
	switch {
	case k.Owner == "" || len(k.Owner) > MaxOwnerBytes || !utf8.ValidString(k.Owner):
		return invalidArgument("owner must be 1 to %d bytes of UTF-8", MaxOwnerBytes)
	case !ValidID(k.ID):
		return invalidArgument("session id %q is not 1 to %d characters of [A-Za-z0-9._:-], the first a letter or digit", k.ID, MaxIDBytes)
	}
	return nil
}

// Session is a session as loaded for a turn.
type Session struct {
	Key
	// Version counts the writes of the session item: commits and a
	// delete's tombstone. 0 is a session that does not exist yet.
	Version int64
	// Count is how many messages the session has stored.
	Count int
	// Conversation is the active window, the manager's state and the agent
	// state: what a turn starts from.
	Conversation agent.Conversation
	CreatedAt    time.Time
	UpdatedAt    time.Time
	// ExpiresAt is zero when the session never expires.
	ExpiresAt time.Time
	// Title is the start of the session's first message; see List.
	Title string
	// Replay is what the idempotency key given to Load recorded, when a
	// turn with that key was committed.
	Replay *Replay
	// Resuming is true while a request that claimed the session's pending
	// interrupts (ClaimPending) may still be running their tools.
	Resuming bool

	incarnation   string // tells this session from an earlier one with its key
	claimedUntil  int64  // when the claim on the session id expires; 0 never
	resumingUntil int64  // when the claim on its pending interrupts expires
	// rewound is the version of the last write that rewound the session,
	// to message rewoundTo; 0 when it never was.
	rewound   int64
	rewoundTo int
	// written is, for a sub-agent's conversation, the session version
	// of the commit that wrote it (see LoadAgent).
	written int64
}

// NewSession returns a session that does not exist yet, for a first commit.
func NewSession(key Key) *Session { return &Session{Key: key} }

// Load reads a session for a turn: the session item and the messages of its
// active window. With an idempotency key it also reads, in parallel, the
// caller's record of that key; when the key's request was committed, Replay
// says so (see Replay). It returns ErrNotFound for a session that does not
// exist or has expired; the error also matches ErrIDTaken when another owner
// holds the id, so that no new session can start under it. A session that a
// delete is removing is ErrDeleting.
func (s *Store) Load(ctx context.Context, key Key, idempotencyKey string) (*Session, error) {
	if err := key.validate(); err != nil {
		return nil, err
	}
	if err := validIdempotencyKey(idempotencyKey); err != nil {
		return nil, err
	}
	var (
		sess   *Session
		record item
	)
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() (err error) {
		// A read that overlapped a commit is read again. A message that
		// stays unseen is gone (deleted by hand, say): the last read
		// starts the window after it rather than fail every turn.
		sess, err = s.loadWindow(gctx, key)
		return err
	})
	if idempotencyKey != "" {
		g.Go(func() (err error) {
			record, err = s.getItem(gctx, recordKey(key.Owner, idempotencyKey), skRecord)
			return err
		})
	}
	err := g.Wait()
	if err != nil {
		if errors.Is(err, ErrNotFound) {
			err = s.checkClaim(ctx, key)
		}
		return nil, fmt.Errorf("ddbhistory: load %s: %w", key.ID, err)
	}
	if record != nil && !expired(record, s.cfg.Now()) && getS(record, attrStatus) == statusDone {
		if sess.Replay, err = s.replay(ctx, sess, record, idempotencyKey); err != nil {
			return nil, fmt.Errorf("ddbhistory: load %s: %w", key.ID, err)
		}
	}
	return sess, nil
}

// checkClaim tells a session id that is free from one another owner holds:
// ErrNotFound for the first, ErrNotFound and ErrIDTaken for the second, so
// that a caller can refuse a new turn before running it.
func (s *Store) checkClaim(ctx context.Context, key Key) error {
	claim, err := s.getItem(ctx, claimKey(key.ID), skClaim)
	switch {
	case err != nil:
		return err
	case claim != nil && !expired(claim, s.cfg.Now()) && getS(claim, attrOwner) != key.Owner:
		return fmt.Errorf("%w: %w", ErrNotFound, ErrIDTaken)
	}
	return ErrNotFound
}

// getItem reads one item, strongly consistently; nil when there is none.
func (s *Store) getItem(ctx context.Context, pk, sk string) (item, error) {
	out, err := s.client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(s.cfg.Table),
		Key:            item{PartitionKey: str(pk), SortKey: str(sk)},
		ConsistentRead: aws.Bool(true),
	}, s.retries)
	if err != nil {
		return nil, s.classify(err)
	}
	return out.Item, nil
}

// loadWindow reads the session item and the window's messages.
func (s *Store) loadWindow(ctx context.Context, key Key) (*Session, error) {
	sess, window, first, err := s.readNewestSettled(ctx, key, mainKeys, s.cfg.WindowHint, windowStart)
	if err != nil {
		return nil, err
	}
	sess.Conversation.Messages, sess.Conversation.Window.Removed = window, first
	return sess, nil
}

// windowStart is where a conversation's active window starts.
func windowStart(sess *Session) int { return sess.Conversation.Window.Removed }

// readNewest reads the conversation item of keyspace ks and its newest
// messages, from the index from gives the conversation to its last: newest
// first, so that the first request ends with the conversation item and
// holds them whenever they are no more than hint items. It returns them
// oldest first, with the index of the first, as messageSet.window runs
// them. For mainKeys the item is the session item; for a sub-agent's, a
// missing or expired item is a conversation with no messages yet.
func (s *Store) readNewest(ctx context.Context, key Key, ks keyspace, hint int, fromOf func(*Session) int, skipUnseen bool) (*Session, []agent.Message, int, error) {
	pk := partitionKey(key)
	now := s.cfg.Now()
	in := &dynamodb.QueryInput{
		TableName:              aws.String(s.cfg.Table),
		KeyConditionExpression: aws.String("#pk = :pk AND #sk BETWEEN :lo AND :hi"),
		ExpressionAttributeNames: map[string]string{
			"#pk": PartitionKey, "#sk": SortKey,
		},
		ExpressionAttributeValues: item{":pk": str(pk), ":lo": str(string(ks) + skMessage), ":hi": str(ks.meta())},
		ScanIndexForward:          aws.Bool(false),
		ConsistentRead:            aws.Bool(true),
		Limit:                     aws.Int32(int32(hint + 1)),
	}
	out, err := s.client.Query(ctx, in, s.retries)
	if err != nil {
		return nil, nil, 0, s.classify(err)
	}
	var meta item
	if len(out.Items) > 0 && getS(out.Items[0], SortKey) == ks.meta() {
		meta = out.Items[0]
	}
	switch state := sessionState(meta, now); {
	case ks != mainKeys && (meta == nil || expired(meta, now)):
		return &Session{Key: key}, nil, 0, nil
	case ks != mainKeys:
	case state == stateDeleting:
		return nil, nil, 0, ErrDeleting
	case state == stateAbsent:
		return nil, nil, 0, ErrNotFound
	}
	sess, err := decodeMeta(key, meta, now)
	if err != nil {
		return nil, nil, 0, err
	}
	from := fromOf(sess)
	msgs := newMessageSet(ks)
	msgs.add(out.Items[1:], now)
	// Read on only when the first page stopped before the first message
	// wanted: at the hint, or at 1 MB. In descending order a message's parts
	// come before it, so that message is complete once it is found. The
	// read stops at the session's last message: items above it are hidden
	// leftovers of a turn that never committed (see Commit), and a first
	// page full of them is not read on from.
	if start := out.LastEvaluatedKey; start != nil && from < sess.Count && !msgs.complete(from) {
		in.Limit = nil
		in.ExpressionAttributeValues[":lo"] = str(ks.message(from))
		in.ExpressionAttributeValues[":hi"] = str(ks.last(sess.Count - 1))
		if getS(start, SortKey) > ks.last(sess.Count-1) {
			start = nil
		}
		for first := true; first || start != nil; first = false {
			in.ExclusiveStartKey = start
			out, err := s.client.Query(ctx, in, s.retries)
			if err != nil {
				return nil, nil, 0, s.classify(err)
			}
			msgs.add(out.Items, now)
			start = out.LastEvaluatedKey
		}
	}
	newest, first, err := msgs.window(from, sess, skipUnseen)
	if err != nil {
		return nil, nil, 0, err
	}
	return sess, newest, first, nil
}

// readNewestSettled is readNewest, made again when it overlapped a commit
// (errUnseen), as Load's read is: the third attempt takes a message that
// stays unseen for gone.
func (s *Store) readNewestSettled(ctx context.Context, key Key, ks keyspace, hint int, fromOf func(*Session) int) (sess *Session, msgs []agent.Message, first int, err error) {
	for attempt := 0; attempt == 0 || errors.Is(err, errUnseen) && attempt < 3; attempt++ {
		sess, msgs, first, err = s.readNewest(ctx, key, ks, hint, fromOf, attempt == 2)
	}
	return sess, msgs, first, err
}

// errUnseen is a message the session item counts but a read did not see, or
// saw as another commit wrote it: a commit landed while the read ran (a Query
// is not isolated from a transaction), and reading again sees it.
var errUnseen = errors.New("a counted message was not seen")

// window returns the active window from the messages found: the longest run
// of messages ending with the newest. An expired message, or one that cannot
// be decoded, moves the window's start past it, so that the window's first
// index is still the start it returns. A message that was not seen at all is
// errUnseen, for the load to be read again rather than lose context, unless
// skipUnseen treats it as expired; so is one that is not current.
func (ms *messageSet) window(from int, sess *Session, skipUnseen bool) ([]agent.Message, int, error) {
	var msgs []agent.Message
	count := sess.Count
	start := count
	for i := count - 1; i >= from; i-- {
		if !ms.current(i, sess) {
			if skipUnseen {
				break
			}
			return nil, 0, fmt.Errorf("%w: message %d of %d was rewritten", errUnseen, i, count)
		}
		if !ms.complete(i) {
			if ms.expired[i] || skipUnseen {
				break
			}
			return nil, 0, fmt.Errorf("%w: message %d of %d", errUnseen, i, count)
		}
		m, err := ms.found[i].decode()
		if err != nil {
			break
		}
		msgs = append(msgs, m)
		start = i
	}
	slices.Reverse(msgs)
	return msgs, start, nil
}

// decodeMeta reads a session item, without its messages, as of now: a
// claim on its pending interrupts that lasts past now is Resuming.
func decodeMeta(key Key, it item, now time.Time) (*Session, error) {
	sess := &Session{
		Key:          key,
		Version:      getN(it, attrVersion),
		Count:        int(getN(it, attrCount)),
		CreatedAt:    time.UnixMilli(getN(it, attrCreated)),
		UpdatedAt:    time.UnixMilli(getN(it, attrUpdated)),
		Title:        getS(it, attrTitle),
		incarnation:  getS(it, attrIncarnation),
		claimedUntil: getN(it, attrClaimed),
		rewound:      getN(it, attrRewound),
		rewoundTo:    int(getN(it, attrRewoundTo)),
		written:      getN(it, attrWritten),
		// A conversation item of a sub-agent's has no claim.
		resumingUntil: getN(it, attrResuming),
	}
	sess.Resuming = sess.resumingUntil > now.Unix()
	if at := getN(it, TTLAttribute); at > 0 {
		sess.ExpiresAt = time.Unix(at, 0)
	}
	if w := getS(it, attrWindow); w != "" {
		if err := json.Unmarshal([]byte(w), &sess.Conversation.Window); err != nil {
			return nil, fmt.Errorf("decode window state: %w", err)
		}
	}
	if st := getS(it, attrState); st != "" {
		if err := json.Unmarshal([]byte(st), &sess.Conversation.State); err != nil {
			return nil, fmt.Errorf("decode agent state: %w", err)
		}
	}
	if p := getB(it, attrPending); p != nil {
		raw, err := decompress(p)
		if err == nil {
			err = json.Unmarshal(raw, &sess.Conversation.Pending)
		}
		if err != nil {
			return nil, fmt.Errorf("decode pending interrupts: %w", err)
		}
	}
	w := &sess.Conversation.Window
	w.Removed = min(max(w.Removed, 0), sess.Count)
	return sess, nil
}

// liveness is what a session item says of its session.
type liveness int

const (
	// stateAbsent: no session. The item is missing, expired, or only a
	// reservation for a new session's first commit (see Commit), which has
	// no creation time until that commit.
	stateAbsent liveness = iota
	// stateLive: a session that readers see.
	stateLive
	// stateDeleting: a tombstone, written by Delete, whose cleanup has not
	// finished (see Delete).
	stateDeleting
)

// sessionState tells what a session item, which may be nil, stands for.
func sessionState(meta item, now time.Time) liveness {
	switch {
	case meta == nil || expired(meta, now):
		return stateAbsent
	case meta[attrDeleted] != nil:
		return stateDeleting
	case meta[attrCreated] == nil:
		return stateAbsent
	}
	return stateLive
}

// lastKeyOf is the highest sort key message i and its parts can have.
func lastKeyOf(i int) string { return messageKey(i) + "#~" }

// maxIdempotencyKey bounds idempotency keys, which become sort keys.
const maxIdempotencyKey = 256

// validIdempotencyKey refuses a key that cannot be stored; "" is valid.
func validIdempotencyKey(k string) error {
	if len(k) > maxIdempotencyKey || !utf8.ValidString(k) {
		return invalidArgument("an idempotency key must be at most %d bytes of UTF-8", maxIdempotencyKey)
	}
	return nil
}

// validate refuses a nil session or one with an invalid key.
func (sess *Session) validate() error {
	if sess == nil {
		return invalidArgument("nil session")
	}
	return sess.Key.validate()
}

// expiry returns the TTL value for an item written at now that lives for d;
// 0, which never expires, when d is 0.
func (s *Store) expiry(now time.Time, d time.Duration) int64 {
	if d <= 0 {
		return 0
	}
	return now.Add(d).Unix()
}

// condition is a condition expression with its names and values.
type condition struct {
	expr   string
	names  map[string]string
	values item
}

// absentOrExpired holds for an item that does not exist, judged by a key
// attribute, or whose TTL has passed.
func absentOrExpired(keyAttr string, now time.Time) *condition {
	return &condition{
		expr:   "attribute_not_exists(#key) OR (#ttl > :zero AND #ttl <= :now)",
		names:  map[string]string{"#key": keyAttr, "#ttl": TTLAttribute},
		values: item{":zero": num(0), ":now": num(now.Unix())},
	}
}

// claimable holds for a claim on a session id that is free: absent, expired,
// or held by owner already.
func claimable(owner string, now time.Time) *condition {
	c := absentOrExpired(PartitionKey, now)
	c.expr += " OR #owner = :owner"
	c.names["#owner"] = attrOwner
	c.values[":owner"] = str(owner)
	return c
}

// versionIs holds for a session item at the given version.
func versionIs(v int64) *condition {
	return &condition{
		expr:   "#version = :version",
		names:  map[string]string{"#version": attrVersion},
		values: item{":version": num(v)},
	}
}

// noSession holds for a session item that stands for no session: absent,
// expired, or a reservation (see Commit). A tombstone is not one: a new
// session under the id waits until the delete's cleanup is done.
func noSession(now time.Time) *condition {
	c := absentOrExpired(PartitionKey, now)
	c.expr += " OR (attribute_not_exists(#created) AND attribute_not_exists(#deleted))"
	c.names["#created"] = attrCreated
	c.names["#deleted"] = attrDeleted
	return c
}

// and joins c and d, whose names and values must not clash.
func (c *condition) and(d *condition) *condition {
	out := &condition{expr: "(" + c.expr + ") AND (" + d.expr + ")", names: map[string]string{}, values: item{}}
	for _, x := range []*condition{c, d} {
		maps.Copy(out.names, x.names)
		maps.Copy(out.values, x.values)
	}
	return out
}

// put returns a transaction's Put of it, on condition c when c is not nil.
func (s *Store) put(it item, c *condition) types.TransactWriteItem {
	p := &types.Put{TableName: aws.String(s.cfg.Table), Item: it}
	if c != nil {
		p.ConditionExpression = aws.String(c.expr)
		p.ExpressionAttributeNames = c.names
		p.ExpressionAttributeValues = c.values
	}
	return types.TransactWriteItem{Put: p}
}

// remove returns a transaction's Delete of the item with key k, on condition
// c when c is not nil.
func (s *Store) remove(k item, c *condition) types.TransactWriteItem {
	d := &types.Delete{TableName: aws.String(s.cfg.Table), Key: k}
	if c != nil {
		d.ConditionExpression = aws.String(c.expr)
		d.ExpressionAttributeNames = c.names
		d.ExpressionAttributeValues = c.values
	}
	return types.TransactWriteItem{Delete: d}
}

// check returns a transaction's ConditionCheck of c on the item at pk, sk.
func (s *Store) check(pk, sk string, c *condition) types.TransactWriteItem {
	return types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{
		TableName:                 aws.String(s.cfg.Table),
		Key:                       item{PartitionKey: str(pk), SortKey: str(sk)},
		ConditionExpression:       aws.String(c.expr),
		ExpressionAttributeNames:  c.names,
		ExpressionAttributeValues: c.values,
	}}
}

// checkTransaction refuses a transaction that DynamoDB would refuse.
func checkTransaction(sizes []int) error {
	total := 0
	for i, n := range sizes {
		if n > MaxItemBytes {
			return &TooLargeError{What: fmt.Sprintf("item %d", i), Size: n, Limit: MaxItemBytes}
		}
		total += n
	}
	switch {
	case len(sizes) > MaxTransactionItems:
		return &TooLargeError{What: "turn", Size: len(sizes), Limit: MaxTransactionItems, Items: true}
	case total > MaxTransactionBytes:
		return &TooLargeError{What: "turn", Size: total, Limit: MaxTransactionBytes}
	}
	return nil
}

// newIncarnation returns a random token, for incarnations, holds, writers
// and transactions' request tokens.
func newIncarnation() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read does not fail
	return hex.EncodeToString(b[:])
}

package ddbhistory

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
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
	BatchWriteItem(context.Context, *dynamodb.BatchWriteItemInput, ...func(*dynamodb.Options)) (*dynamodb.BatchWriteItemOutput, error)
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

var idPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:-]{0,127}$`)

// ValidID reports whether id can name a session.
func ValidID(id string) bool { return idPattern.MatchString(id) }

func (k Key) validate() error {
	switch {
	case k.Owner == "" || len(k.Owner) > MaxOwnerBytes || !utf8.ValidString(k.Owner):
		return invalidArgument("owner must be 1 to %d bytes of UTF-8", MaxOwnerBytes)
	case !ValidID(k.ID):
		return invalidArgument("session id %q does not match %s", k.ID, idPattern)
	}
	return nil
}

// Session is a session as loaded for a turn.
type Session struct {
	Key
	// Version counts commits; 0 is a session that does not exist yet.
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

	incarnation  string // tells this session from an earlier one with its key
	claimedUntil int64  // when the claim on the session id expires; 0 never
	idemKey      string // the idempotency key this turn holds; see Begin
	idemToken    string // and the token of the hold
}

// NewSession returns a session that does not exist yet, for a first commit.
func NewSession(key Key) *Session { return &Session{Key: key} }

// Load reads a session for a turn: the session item and the messages of its
// active window. With an idempotency key it also looks for the response of an
// earlier turn with that key, in parallel. It returns ErrNotFound for a session
// that does not exist or has expired; the error also matches ErrIDTaken when
// another owner holds the id, so that no new session can start under it.
func (s *Store) Load(ctx context.Context, key Key, idempotencyKey string) (*Session, error) {
	if err := key.validate(); err != nil {
		return nil, err
	}
	if err := validIdempotencyKey(idempotencyKey); err != nil {
		return nil, err
	}
	var (
		sess   *Session
		replay item
	)
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() (err error) {
		// A read that overlapped a commit is read again. A message that
		// stays unseen is gone (deleted by hand, say): the last read
		// starts the window after it rather than fail every turn.
		for attempt := range 3 {
			if sess, err = s.loadWindow(gctx, key, attempt == 2); !errors.Is(err, errUnseen) {
				return err
			}
		}
		return err
	})
	if idempotencyKey != "" {
		g.Go(func() (err error) {
			replay, err = s.getItem(gctx, partitionKey(key), skIdempotency+idempotencyKey)
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
	if replay != nil && !expired(replay, s.cfg.Now()) && getS(replay, attrStatus) == statusDone && getS(replay, attrIncarnation) == sess.incarnation {
		if sess.Replay, err = decodeReplay(replay); err != nil {
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
		return nil, classify(err)
	}
	return out.Item, nil
}

// loadWindow reads the session item and the window's messages: newest first,
// so that the first page ends with the session item and holds the window
// whenever it is no longer than the hint.
func (s *Store) loadWindow(ctx context.Context, key Key, skipUnseen bool) (*Session, error) {
	pk := partitionKey(key)
	now := s.cfg.Now()
	in := &dynamodb.QueryInput{
		TableName:              aws.String(s.cfg.Table),
		KeyConditionExpression: aws.String("#pk = :pk AND #sk BETWEEN :lo AND :hi"),
		ExpressionAttributeNames: map[string]string{
			"#pk": PartitionKey, "#sk": SortKey,
		},
		ExpressionAttributeValues: item{":pk": str(pk), ":lo": str(skMessage), ":hi": str(skMeta)},
		ScanIndexForward:          aws.Bool(false),
		ConsistentRead:            aws.Bool(true),
		Limit:                     aws.Int32(int32(s.cfg.WindowHint + 1)),
	}
	out, err := s.client.Query(ctx, in, s.retries)
	if err != nil {
		return nil, classify(err)
	}
	if len(out.Items) == 0 || getS(out.Items[0], SortKey) != skMeta || expired(out.Items[0], now) {
		return nil, ErrNotFound
	}
	sess, err := decodeMeta(key, out.Items[0])
	if err != nil {
		return nil, err
	}
	from := sess.Conversation.Window.Removed
	msgs := newMessageSet()
	msgs.add(out.Items[1:], now)
	// Read on only when the first page stopped before the window's first
	// message: at the hint, or at 1 MB. In descending order a message's parts
	// come before it, so that message is complete once it is found.
	if start := out.LastEvaluatedKey; start != nil && from < sess.Count && !msgs.complete(from) {
		in.Limit = nil
		in.ExpressionAttributeValues[":lo"] = str(messageKey(from))
		for start != nil {
			in.ExclusiveStartKey = start
			out, err := s.client.Query(ctx, in, s.retries)
			if err != nil {
				return nil, classify(err)
			}
			msgs.add(out.Items, now)
			start = out.LastEvaluatedKey
		}
	}
	window, removed, err := msgs.window(from, sess.Count, skipUnseen)
	if err != nil {
		return nil, err
	}
	sess.Conversation.Messages, sess.Conversation.Window.Removed = window, removed
	return sess, nil
}

// errUnseen is a message the session item counts but a read did not see: a
// commit landed while the read ran (a Query is not isolated from a
// transaction), and reading again sees it.
var errUnseen = errors.New("a counted message was not seen")

// window returns the active window from the messages found: the longest run
// of messages ending with the newest. An expired message, or one that cannot
// be decoded, moves the window's start past it, so that the window's first
// index is still the start it returns. A message that was not seen at all is
// errUnseen, for the load to be read again rather than lose context, unless
// skipUnseen treats it as expired.
func (ms *messageSet) window(from, count int, skipUnseen bool) ([]agent.Message, int, error) {
	var msgs []agent.Message
	start := count
	for i := count - 1; i >= from; i-- {
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

func decodeMeta(key Key, it item) (*Session, error) {
	sess := &Session{
		Key:          key,
		Version:      getN(it, attrVersion),
		Count:        int(getN(it, attrCount)),
		CreatedAt:    time.UnixMilli(getN(it, attrCreated)),
		UpdatedAt:    time.UnixMilli(getN(it, attrUpdated)),
		Title:        getS(it, attrTitle),
		incarnation:  getS(it, attrIncarnation),
		claimedUntil: getN(it, attrClaimed),
	}
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
	w := &sess.Conversation.Window
	w.Removed = min(max(w.Removed, 0), sess.Count)
	return sess, nil
}

// Turn is what a turn adds to a session.
type Turn struct {
	// Messages are appended to the session, in order.
	Messages []agent.Message
	// Window is the conversation manager's state after the turn.
	Window agent.WindowState
	// State is the agent state after the turn.
	State map[string]json.RawMessage
	// IdempotencyKey, when set, stores Response for replays of the turn,
	// with Fingerprint, which identifies the request, and where the turn's
	// messages are.
	IdempotencyKey string
	Fingerprint    string
	Response       json.RawMessage
}

// Commit writes a turn to the session it was loaded as, in one transaction:
// the new messages, the idempotency record and the session item, on the
// condition that nobody committed since sess was loaded. Either all of it is
// written or none. A first commit also claims the session id, which is unique
// across owners.
//
// It returns ErrConflict when another commit came first, ErrNotFound when a
// new session's id belongs to another owner, ErrTooLarge when the turn does
// not fit one transaction, and ErrThrottled when DynamoDB throttled every
// attempt. On success it updates sess to the committed state.
func (s *Store) Commit(ctx context.Context, sess *Session, turn Turn) error {
	if err := sess.validate(); err != nil {
		return err
	}
	if err := validIdempotencyKey(turn.IdempotencyKey); err != nil {
		return err
	}
	now := s.cfg.Now()
	count := sess.Count + len(turn.Messages)
	if w := turn.Window; w.Removed < 0 || w.Removed > count {
		return invalidArgument("window starts at message %d of %d", w.Removed, count)
	}
	pk := partitionKey(sess.Key)
	expires := s.expiry(now, s.cfg.TTL)

	var items []types.TransactWriteItem
	var sizes []int
	put := func(it item, c *condition) {
		p := &types.Put{TableName: aws.String(s.cfg.Table), Item: it}
		if c != nil {
			p.ConditionExpression = aws.String(c.expr)
			p.ExpressionAttributeNames = c.names
			p.ExpressionAttributeValues = c.values
		}
		items = append(items, types.TransactWriteItem{Put: p})
		sizes = append(sizes, itemSize(it))
	}
	for i, m := range turn.Messages {
		its, err := messageItems(pk, sess.Count+i, m, expires, now)
		if err != nil {
			return fmt.Errorf("ddbhistory: commit %s: %w", sess.ID, err)
		}
		for _, it := range its {
			put(it, nil)
		}
	}

	incarnation := sess.incarnation
	if sess.Version == 0 {
		incarnation = newIncarnation()
	}
	if turn.IdempotencyKey != "" {
		// The record may replace this turn's own hold on the key (Begin).
		c := absentOrExpired(SortKey, now)
		c.expr += " OR #token = :token"
		c.names["#token"] = attrToken
		c.values[":token"] = str(sess.idemToken)
		put(item{
			PartitionKey:    str(pk),
			SortKey:         str(skIdempotency + turn.IdempotencyKey),
			attrStatus:      str(statusDone),
			attrResponse:    bin(compress(turn.Response)),
			attrFingerprint: str(turn.Fingerprint),
			attrFirst:       num(sess.Count),
			attrCount:       num(len(turn.Messages)),
			attrIncarnation: str(incarnation),
			TTLAttribute:    num(s.expiry(now, s.cfg.IdempotencyTTL)),
		}, c)
	}

	window, err := json.Marshal(turn.Window)
	if err != nil {
		return fmt.Errorf("ddbhistory: commit %s: encode window: %w", sess.ID, err)
	}
	state, err := json.Marshal(turn.State)
	if err != nil {
		return fmt.Errorf("ddbhistory: commit %s: encode state: %w", sess.ID, err)
	}
	created, title := sess.CreatedAt, sess.Title
	if sess.Version == 0 {
		created, title = now, titleOf(turn.Messages)
	}
	// The claim on the session id lives twice as long as the session item
	// and is renewed whenever it has less than a TTL left, so it always
	// outlives the session, while a turn usually writes no more than its
	// messages and the session item.
	claimedUntil := sess.claimedUntil
	claimIndex := -1
	if sess.Version == 0 || (claimedUntil > 0 && claimedUntil-now.Unix() < int64(s.cfg.TTL.Seconds())) {
		claimedUntil = s.expiry(now, 2*s.cfg.TTL)
		claimIndex = len(items)
		put(item{
			PartitionKey: str(claimKey(sess.ID)),
			SortKey:      str(skClaim),
			attrOwner:    str(sess.Owner),
			TTLAttribute: num(claimedUntil),
		}, claimable(sess.Owner, now))
	}
	meta := item{
		PartitionKey:    str(pk),
		SortKey:         str(skMeta),
		attrOwner:       str(sess.Owner),
		attrSessionID:   str(sess.ID),
		attrVersion:     num(sess.Version + 1),
		attrCount:       num(count),
		attrWindow:      str(string(window)),
		attrState:       str(string(state)),
		attrIncarnation: str(incarnation),
		attrCreated:     num(created.UnixMilli()),
		attrUpdated:     num(now.UnixMilli()),
		attrClaimed:     num(claimedUntil),
		TTLAttribute:    num(expires),
	}
	if title != "" {
		meta[attrTitle] = str(title)
	}
	if sess.Version == 0 {
		// A session that expired but is not deleted yet may be replaced.
		put(meta, absentOrExpired(PartitionKey, now))
	} else {
		put(meta, versionIs(sess.Version))
	}
	if err := checkTransaction(sizes); err != nil {
		return fmt.Errorf("ddbhistory: commit %s: %w", sess.ID, err)
	}

	_, err = s.client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{
		TransactItems: items,
		// The same token on the SDK's retries makes a retry of a commit that
		// did succeed succeed again, rather than fail its version check.
		ClientRequestToken: aws.String(newIncarnation() + newIncarnation()),
	}, s.retries)
	if err != nil {
		if claimIndex >= 0 && failedAt(err, claimIndex) {
			// Another owner holds this id. To the caller it does not exist.
			return fmt.Errorf("ddbhistory: commit %s: %w", sess.ID, ErrNotFound)
		}
		return fmt.Errorf("ddbhistory: commit %s: %w", sess.ID, classify(err))
	}
	sess.Version++
	sess.claimedUntil = claimedUntil
	sess.Count = count
	sess.Conversation = agent.Conversation{Window: turn.Window, State: turn.State}
	sess.CreatedAt, sess.UpdatedAt = time.UnixMilli(created.UnixMilli()), time.UnixMilli(now.UnixMilli())
	sess.ExpiresAt = time.Time{}
	if expires > 0 {
		sess.ExpiresAt = time.Unix(expires, 0)
	}
	sess.incarnation, sess.Title = incarnation, title
	sess.Replay = nil
	sess.idemKey, sess.idemToken = "", ""
	return nil
}

// maxIdempotencyKey bounds idempotency keys, which become sort keys.
const maxIdempotencyKey = 256

func validIdempotencyKey(k string) error {
	if len(k) > maxIdempotencyKey || !utf8.ValidString(k) {
		return invalidArgument("an idempotency key must be at most %d bytes of UTF-8", maxIdempotencyKey)
	}
	return nil
}

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

func newIncarnation() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read does not fail
	return hex.EncodeToString(b[:])
}

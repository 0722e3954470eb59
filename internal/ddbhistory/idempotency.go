package ddbhistory

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// An idempotency key names one request of one owner, whatever session it
// goes to. Its record lives in a partition of its own, "i#" and a hash of
// the owner and the key, so that one key cannot serve two sessions: the
// record is first a hold, written by Begin while the turn runs, and then
// the committed turn's fingerprint and session, written by Commit in the
// turn's transaction. The response itself is part of the session, sort key
// "r#" and the key, so that deleting the session deletes it too.
const (
	statusPending = "pending"
	statusDone    = "done"

	skRecord   = "key"
	skResponse = "r#"
)

// recordKey is the partition of owner's record of an idempotency key. The
// hash keeps any owner and key apart without escaping either.
func recordKey(owner, key string) string {
	sum := sha256.Sum256([]byte(owner + "\x00" + key))
	return "i#" + hex.EncodeToString(sum[:])
}

// HoldMargin is how long a hold on an idempotency key outlives the deadline
// of the invocation that took it, when the invocation neither committed nor
// released it because its process died. Lambda stops an invocation at its
// deadline, so by then the turn can no longer commit; the margin covers
// clocks and a write still in flight.
const HoldMargin = 2 * time.Second

// DefaultHoldTTL is how long a hold lasts when the context that takes it
// has no deadline, as in a local run. Lambda invocations always have one.
const DefaultHoldTTL = 5 * time.Minute

// Replay is what an idempotency key recorded for a committed request.
type Replay struct {
	// Fingerprint identifies the request that used the key.
	Fingerprint string
	// SessionID is the session its turn went to.
	SessionID string
	// Response is the response the turn answered with. It is nil when the
	// turn cannot be replayed on the session loaded: the key went to another
	// session, or its session has been deleted since.
	Response json.RawMessage
	// First and Count locate the turn's messages in the transcript.
	First, Count int
}

// replay reads what a committed record says of the request, and the response
// when the record's turn is in sess.
func (s *Store) replay(ctx context.Context, sess *Session, record item, idempotencyKey string) (*Replay, error) {
	r := &Replay{Fingerprint: getS(record, attrFingerprint), SessionID: getS(record, attrSessionID)}
	if r.SessionID != sess.ID || getS(record, attrIncarnation) != sess.incarnation {
		return r, nil
	}
	resp, err := s.getItem(ctx, partitionKey(sess.Key), skResponse+idempotencyKey)
	if err != nil || resp == nil || expired(resp, s.cfg.Now()) {
		return r, err
	}
	first, count := int(getN(resp, attrFirst)), int(getN(resp, attrCount))
	if gone, err := s.rewoundSince(ctx, sess, getN(resp, attrWritten), first, count); err != nil || gone {
		return r, err
	}
	if r.Response, err = decompress(getB(resp, attrResponse)); err != nil {
		return nil, fmt.Errorf("decode the idempotent response: %w", err)
	}
	r.First, r.Count = first, count
	return r, nil
}

// rewoundSince reports whether a rewind after version written discarded any
// of sess's messages first to first+count-1: they are past the session's
// count, or were written again since.
func (s *Store) rewoundSince(ctx context.Context, sess *Session, written int64, first, count int) (bool, error) {
	switch {
	case sess.rewound <= written || count == 0:
		return false, nil
	case first+count > sess.Count:
		return true, nil
	}
	items, err := s.queryMessages(ctx, partitionKey(sess.Key), mainKeys, first, first+count, attrWritten)
	if err != nil {
		return false, err
	}
	for _, it := range items {
		if getN(it, attrWritten) > written {
			return true, nil
		}
	}
	return false, nil
}

// recordWrites returns a commit's idempotency writes: the record, which may
// replace this turn's own hold (Begin) but no other, and the response.
func (s *Store) recordWrites(sess *Session, turn Turn, incarnation string, now time.Time) []write {
	first := turn.First(sess)
	expires := num(s.expiry(now, s.cfg.IdempotencyTTL))
	c := absentOrExpired(SortKey, now)
	c.expr += " OR #token = :token"
	c.names["#token"] = attrToken
	c.values[":token"] = str(turn.Hold.token)
	record := item{
		PartitionKey:    str(recordKey(sess.Owner, turn.Hold.Key)),
		SortKey:         str(skRecord),
		attrStatus:      str(statusDone),
		attrFingerprint: str(turn.Hold.Fingerprint),
		attrSessionID:   str(sess.ID),
		attrIncarnation: str(incarnation),
		TTLAttribute:    expires,
	}
	resp := item{
		PartitionKey: str(partitionKey(sess.Key)),
		SortKey:      str(skResponse + turn.Hold.Key),
		attrResponse: bin(compress(turn.Response)),
		attrFirst:    num(first - turn.Earlier),
		attrCount:    num(turn.Earlier + len(turn.Messages)),
		attrWritten:  num(sess.Version + 1),
		TTLAttribute: expires,
	}
	return []write{{s.put(record, c), itemSize(record)}, {s.put(resp, nil), itemSize(resp)}}
}

// ErrKeyInUse is Begin's error for an idempotency key that another request
// holds or has used; the error is a *KeyInUseError.
var ErrKeyInUse = errors.New("idempotency key in use")

// KeyInUseError says who holds an idempotency key.
type KeyInUseError struct {
	// Fingerprint identifies the request that holds the key.
	Fingerprint string
	// Committed is true when that request's turn is committed, and Load
	// returns its Replay; false while it is still running.
	Committed bool
}

// Error says whether the key's request is running or committed.
func (e *KeyInUseError) Error() string {
	if e.Committed {
		return "the idempotency key was used by a committed turn"
	}
	return "a request with the idempotency key is in progress"
}

// Is makes errors.Is(err, ErrKeyInUse) true.
func (e *KeyInUseError) Is(target error) bool { return target == ErrKeyInUse }

// Hold is an idempotency key held for one turn. Begin returns it; a Commit
// whose Turn carries it replaces it with the key's record, and Release frees
// it. A Hold belongs to the session it was taken for.
type Hold struct {
	// Key is the idempotency key.
	Key string
	// Fingerprint identifies the request, as given to Begin.
	Fingerprint string

	owner, sessionID string
	token            string // tells this hold from a later one on the key
}

// validFor checks that h, which may be nil, was taken for sess.
func (h *Hold) validFor(sess *Session) error {
	if h != nil && (h.owner != sess.Owner || h.sessionID != sess.ID || h.token == "") {
		return invalidArgument("the idempotency key %q was not held for session %s", h.Key, sess.ID)
	}
	return nil
}

// Begin holds an idempotency key of sess's owner for the turn about to run
// on sess, so that a retry that arrives while it runs, on this session or
// any other, is refused instead of running a turn again. Commit replaces the
// hold with the turn's record; Release frees it when the turn fails. A hold
// that is neither, because its process died, expires HoldMargin after ctx's
// deadline, when that invocation could no longer commit. It returns a
// *KeyInUseError when another request holds or has used the key.
func (s *Store) Begin(ctx context.Context, sess *Session, idempotencyKey, fingerprint string) (*Hold, error) {
	if err := sess.validate(); err != nil {
		return nil, err
	}
	if idempotencyKey == "" {
		return nil, invalidArgument("no idempotency key")
	}
	if err := validIdempotencyKey(idempotencyKey); err != nil {
		return nil, err
	}
	now := s.cfg.Now()
	token := newIncarnation()
	pk := recordKey(sess.Owner, idempotencyKey)
	c := absentOrExpired(SortKey, now)
	_, err := s.client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(s.cfg.Table),
		Item: item{
			PartitionKey:    str(pk),
			SortKey:         str(skRecord),
			attrStatus:      str(statusPending),
			attrFingerprint: str(fingerprint),
			attrSessionID:   str(sess.ID),
			attrToken:       str(token),
			TTLAttribute:    num(s.holdExpiry(ctx, now)),
		},
		ConditionExpression:                 aws.String(c.expr),
		ExpressionAttributeNames:            c.names,
		ExpressionAttributeValues:           c.values,
		ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
	}, s.retries)
	var failed *types.ConditionalCheckFailedException
	switch {
	case errors.As(err, &failed):
		held := failed.Item
		if held == nil { // not every DynamoDB returns the item
			if held, err = s.getItem(ctx, pk, skRecord); err != nil {
				return nil, fmt.Errorf("ddbhistory: begin %s: %w", sess.ID, err)
			}
		}
		return nil, fmt.Errorf("ddbhistory: begin %s: %w", sess.ID, &KeyInUseError{
			Fingerprint: getS(held, attrFingerprint),
			Committed:   getS(held, attrStatus) == statusDone,
		})
	case err != nil:
		return nil, fmt.Errorf("ddbhistory: begin %s: %w", sess.ID, s.classify(err))
	}
	return &Hold{Key: idempotencyKey, Fingerprint: fingerprint, owner: sess.Owner, sessionID: sess.ID, token: token}, nil
}

// holdExpiry is when a hold taken at now under ctx expires, in Unix seconds,
// rounded up: HoldMargin after ctx's deadline. The deadline is measured on
// the store's clock, so that Config.Now governs holds as it does all else.
func (s *Store) holdExpiry(ctx context.Context, now time.Time) int64 {
	d := DefaultHoldTTL
	if deadline, ok := ctx.Deadline(); ok {
		d = time.Until(deadline) + HoldMargin
	}
	return int64(math.Ceil(float64(now.Add(d).UnixMilli()) / 1000))
}

// Release frees a hold that Begin returned, after a turn that failed, so
// that a retry need not wait for the hold to expire. It does nothing when h
// is nil, or when its turn committed after all.
func (s *Store) Release(ctx context.Context, h *Hold) error {
	if h == nil || h.token == "" {
		return nil
	}
	_, err := s.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName:                 aws.String(s.cfg.Table),
		Key:                       item{PartitionKey: str(recordKey(h.owner, h.Key)), SortKey: str(skRecord)},
		ConditionExpression:       aws.String("#token = :token AND #status = :pending"),
		ExpressionAttributeNames:  map[string]string{"#token": attrToken, "#status": attrStatus},
		ExpressionAttributeValues: item{":token": str(h.token), ":pending": str(statusPending)},
	}, s.retries)
	var failed *types.ConditionalCheckFailedException
	if err != nil && !errors.As(err, &failed) {
		return fmt.Errorf("ddbhistory: release %s: %w", h.sessionID, s.classify(err))
	}
	return nil
}

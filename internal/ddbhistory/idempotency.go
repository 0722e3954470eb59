package ddbhistory

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// An idempotency record, sort key i#<key>, is first a hold, written by Begin
// while the turn runs, and then the committed turn's response, written by
// Commit in the turn's transaction.
const (
	statusPending = "pending"
	statusDone    = "done"
)

// DefaultHoldTTL is how long a hold on an idempotency key outlives a turn
// that never commits nor releases it, because its process died. It must be
// longer than any invocation that holds a key: 30 s behind API Gateway, 120 s
// for the stream function, whose timeout is in template.yaml. Were it
// shorter, a retry could take the key while the first turn still runs.
const DefaultHoldTTL = 5 * time.Minute

// Replay is what an idempotency key recorded for a committed turn.
type Replay struct {
	// Response is the response the turn answered with.
	Response json.RawMessage
	// Fingerprint identifies the request that used the key.
	Fingerprint string
	// First and Count locate the turn's messages in the transcript.
	First, Count int
}

func decodeReplay(it item) (*Replay, error) {
	resp, err := decompress(getB(it, attrResponse))
	if err != nil {
		return nil, fmt.Errorf("decode the idempotent response: %w", err)
	}
	return &Replay{
		Response:    resp,
		Fingerprint: getS(it, attrFingerprint),
		First:       int(getN(it, attrFirst)),
		Count:       int(getN(it, attrCount)),
	}, nil
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

func (e *KeyInUseError) Error() string {
	if e.Committed {
		return "the idempotency key was used by a committed turn"
	}
	return "a request with the idempotency key is in progress"
}

// Is makes errors.Is(err, ErrKeyInUse) true.
func (e *KeyInUseError) Is(target error) bool { return target == ErrKeyInUse }

// Begin holds an idempotency key for the turn about to run on sess, so that
// a retry that arrives while it runs is refused instead of running the turn
// again. Commit replaces the hold with the turn's response; Release frees it
// when the turn fails. A hold that is neither outlives a crash by
// DefaultHoldTTL. It returns a *KeyInUseError when another request holds or
// has used the key.
func (s *Store) Begin(ctx context.Context, sess *Session, idempotencyKey, fingerprint string) error {
	if err := sess.validate(); err != nil {
		return err
	}
	if idempotencyKey == "" {
		return invalidArgument("no idempotency key")
	}
	if err := validIdempotencyKey(idempotencyKey); err != nil {
		return err
	}
	now := s.cfg.Now()
	token := newIncarnation()
	c := absentOrExpired(SortKey, now)
	_, err := s.client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(s.cfg.Table),
		Item: item{
			PartitionKey:    str(partitionKey(sess.Key)),
			SortKey:         str(skIdempotency + idempotencyKey),
			attrStatus:      str(statusPending),
			attrFingerprint: str(fingerprint),
			attrToken:       str(token),
			TTLAttribute:    num(now.Add(DefaultHoldTTL).Unix()),
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
			if held, err = s.getItem(ctx, partitionKey(sess.Key), skIdempotency+idempotencyKey); err != nil {
				return fmt.Errorf("ddbhistory: begin %s: %w", sess.ID, err)
			}
		}
		return fmt.Errorf("ddbhistory: begin %s: %w", sess.ID, &KeyInUseError{
			Fingerprint: getS(held, attrFingerprint),
			Committed:   getS(held, attrStatus) == statusDone,
		})
	case err != nil:
		return fmt.Errorf("ddbhistory: begin %s: %w", sess.ID, classify(err))
	}
	sess.idemKey, sess.idemToken = idempotencyKey, token
	return nil
}

// Release frees the idempotency key that Begin held for sess, after a turn
// that failed, so that a retry need not wait for the hold to expire. It does
// nothing when there is no hold.
func (s *Store) Release(ctx context.Context, sess *Session) error {
	if sess == nil || sess.idemToken == "" {
		return nil
	}
	_, err := s.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName:                 aws.String(s.cfg.Table),
		Key:                       item{PartitionKey: str(partitionKey(sess.Key)), SortKey: str(skIdempotency + sess.idemKey)},
		ConditionExpression:       aws.String("#token = :token"),
		ExpressionAttributeNames:  map[string]string{"#token": attrToken},
		ExpressionAttributeValues: item{":token": str(sess.idemToken)},
	}, s.retries)
	var failed *types.ConditionalCheckFailedException
	if err != nil && !errors.As(err, &failed) {
		return fmt.Errorf("ddbhistory: release %s: %w", sess.ID, classify(err))
	}
	sess.idemKey, sess.idemToken = "", ""
	return nil
}

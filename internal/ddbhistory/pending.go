package ddbhistory

import (
	"context"
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// ClaimPending claims the pending interrupts of sess, as loaded, for the
// request that resumes them, before it runs any tool they hold back: of two
// requests that race to resume, one claims them and the other gets
// ErrConflict, so that an approved tool runs once. The claim is a write of
// the session item, which moves its version on, so that no turn loaded
// before it can commit; turns loaded after it see Session.Resuming. A claim
// whose request died expires HoldMargin after ctx's deadline, as a hold
// does, and the interrupts can be claimed again. A commit ends it, unless
// its Turn keeps it (Turn.Resuming); ReleaseClaim ends it without one.
func (s *Store) ClaimPending(ctx context.Context, sess *Session) error {
	if err := sess.validate(); err != nil {
		return err
	}
	if sess.Version == 0 || sess.Conversation.Pending == nil {
		return invalidArgument("session %s has no pending interrupts", sess.ID)
	}
	now := s.cfg.Now()
	until := s.holdExpiry(ctx, now)
	_, err := s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:           aws.String(s.cfg.Table),
		Key:                 item{PartitionKey: str(partitionKey(sess.Key)), SortKey: str(skMeta)},
		UpdateExpression:    aws.String("SET #version = #version + :one, #resuming = :until"),
		ConditionExpression: aws.String("#version = :version AND attribute_exists(#pending) AND (attribute_not_exists(#resuming) OR #resuming <= :now)"),
		ExpressionAttributeNames: map[string]string{
			"#version": attrVersion, "#pending": attrPending, "#resuming": attrResuming,
		},
		ExpressionAttributeValues: item{
			":one": num(1), ":version": num(sess.Version), ":until": num(until), ":now": num(now.Unix()),
		},
	}, s.retries)
	var failed *types.ConditionalCheckFailedException
	switch {
	case errors.As(err, &failed):
		return fmt.Errorf("ddbhistory: claim %s: %w", sess.ID, ErrConflict)
	case err != nil:
		return fmt.Errorf("ddbhistory: claim %s: %w", sess.ID, s.classify(err))
	}
	sess.Version++
	sess.Resuming, sess.resumingUntil = true, until
	return nil
}

// ReleaseClaim ends the claim that ClaimPending took on sess and a commit
// kept, after the resume failed, so that the session need not wait for
// the claim to expire. It does nothing when the session has moved on.
func (s *Store) ReleaseClaim(ctx context.Context, sess *Session) error {
	if err := sess.validate(); err != nil {
		return err
	}
	if !sess.Resuming {
		return nil
	}
	_, err := s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName: aws.String(s.cfg.Table),
		Key:       item{PartitionKey: str(partitionKey(sess.Key)), SortKey: str(skMeta)},
		// A claim of 0 has expired; minidyn does not apply a REMOVE alone.
		UpdateExpression:          aws.String("SET #resuming = :zero"),
		ConditionExpression:       aws.String("#version = :version AND #resuming = :until"),
		ExpressionAttributeNames:  map[string]string{"#version": attrVersion, "#resuming": attrResuming},
		ExpressionAttributeValues: item{":version": num(sess.Version), ":until": num(sess.resumingUntil), ":zero": num(0)},
	}, s.retries)
	var failed *types.ConditionalCheckFailedException
	if err != nil && !errors.As(err, &failed) {
		return fmt.Errorf("ddbhistory: release the claim on %s: %w", sess.ID, s.classify(err))
	}
	sess.Resuming, sess.resumingUntil = false, 0
	return nil
}

package ddbhistory

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
)

// ErrDeleting is a session that a delete has removed from view but not yet
// cleaned up: no turn may start on it until the delete finishes. Delete it
// again to finish.
var ErrDeleting = errors.New("the session is being deleted")

// ErrDeleteUnfinished comes from a Delete that removed the session from
// view, but could not remove all of its items. Readers no longer see it; a
// Delete of it again finishes the work.
var ErrDeleteUnfinished = errors.New("the session is deleted, but its cleanup did not finish")

// Delete removes a session and every item of it, in three steps that are
// safe against turns racing with it, and against a crash between any two:
//
//  1. The session item becomes a tombstone: its data removed, its version
//     moved on, a deletion time set. A turn that loaded the session can no
//     longer commit (its version check fails), no new session can start
//     under the id (its first commit needs no session item), and readers
//     see no session. The claim on the id stays with the owner.
//  2. Every other item of the session is deleted, in transactions that each
//     check the tombstone, so that nothing is deleted once another Delete
//     has finished the job and a new session may have started.
//  3. The tombstone and the claim go together.
//
// A Delete that finds a tombstone finishes its cleanup, and succeeds. It
// returns ErrNotFound when there was no live session, after removing
// whatever was left of one; ErrConflict when a commit kept the session busy
// on every attempt, having changed nothing; ErrOutcomeUnknown when ctx ended
// while step 1 was under way, so that the session may or may not be
// deleted; and ErrDeleteUnfinished with the cause when step 2 or 3 failed.
func (s *Store) Delete(ctx context.Context, key Key) error {
	if err := key.validate(); err != nil {
		return err
	}
	pk := partitionKey(key)
	old, tombstone, err := s.tombstone(ctx, pk)
	if err != nil {
		return fmt.Errorf("ddbhistory: delete %s: %w", key.ID, err)
	}
	if tombstone == nil {
		return fmt.Errorf("ddbhistory: delete %s: %w", key.ID, ErrNotFound)
	}
	if err := s.cleanUp(ctx, key, getN(tombstone, attrVersion)); err != nil {
		return fmt.Errorf("ddbhistory: delete %s: %w: %w", key.ID, ErrDeleteUnfinished, err)
	}
	if old != nil && sessionState(old, s.cfg.Now()) != stateLive {
		return fmt.Errorf("ddbhistory: delete %s: %w", key.ID, ErrNotFound)
	}
	return nil
}

// tombstone turns the session item at pk into a tombstone, and returns the
// item before and after. When the item is a tombstone already, from an
// unfinished Delete, old is nil and tombstone is that item; when there is no
// item, both are nil.
func (s *Store) tombstone(ctx context.Context, pk string) (old, tombstone item, err error) {
	now := s.cfg.Now()
	for attempt := 0; ; attempt++ {
		var out *dynamodb.UpdateItemOutput
		out, err = s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName: aws.String(s.cfg.Table),
			Key:       item{PartitionKey: str(pk), SortKey: str(skMeta)},
			// Removing owner and created_at takes the session out of the
			// owner index; the rest is the caller's data.
			UpdateExpression:    aws.String("SET #deleted = :now, #version = if_not_exists(#version, :zero) + :one REMOVE #owner, #created, #title, #window, #state, #writer, #pending, #resuming"),
			ConditionExpression: aws.String("attribute_exists(#pk) AND attribute_not_exists(#deleted)"),
			ExpressionAttributeNames: map[string]string{
				"#pk": PartitionKey, "#deleted": attrDeleted, "#version": attrVersion, "#owner": attrOwner,
				"#created": attrCreated, "#title": attrTitle, "#window": attrWindow, "#state": attrState, "#writer": attrWriter,
				"#pending": attrPending, "#resuming": attrResuming,
			},
			ExpressionAttributeValues:           item{":now": num(now.UnixMilli()), ":zero": num(0), ":one": num(1)},
			ReturnValues:                        types.ReturnValueAllOld,
			ReturnValuesOnConditionCheckFailure: types.ReturnValuesOnConditionCheckFailureAllOld,
		}, s.retries)
		var failed *types.ConditionalCheckFailedException
		switch {
		case err == nil:
			old = out.Attributes
			tombstone = item{attrVersion: num(getN(old, attrVersion) + 1)}
			return old, tombstone, nil
		case errors.As(err, &failed):
			// No session item, or a tombstone already.
			current := failed.Item
			if current == nil { // not every DynamoDB returns the item
				if current, err = s.getItem(ctx, pk, skMeta); err != nil {
					return nil, nil, err
				}
			}
			if current == nil || current[attrDeleted] == nil {
				return nil, nil, nil
			}
			return nil, current, nil
		case transactionConflict(err) && attempt < 4:
			// A commit is writing the session item; let it finish, and
			// delete what it wrote too.
			select {
			case <-ctx.Done():
				return nil, nil, ctx.Err()
			case <-time.After(time.Duration(25<<attempt) * time.Millisecond):
			}
		case ctx.Err() != nil:
			// The update may have reached DynamoDB before ctx ended: the
			// session may be a tombstone now, or still live.
			return nil, nil, fmt.Errorf("%w: %w", ErrOutcomeUnknown, err)
		default:
			return nil, nil, s.classify(err)
		}
	}
}

// transactionConflict reports whether err is DynamoDB refusing a write to an
// item that a transaction is writing.
func transactionConflict(err error) bool {
	var api smithy.APIError
	return errors.As(err, &api) && api.ErrorCode() == "TransactionConflictException"
}

// cleanUp deletes a session's items under the tombstone at version, then the
// tombstone and the claim on the id.
func (s *Store) cleanUp(ctx context.Context, key Key, version int64) error {
	pk := partitionKey(key)
	keys, err := s.queryAll(ctx, &dynamodb.QueryInput{
		TableName:                 aws.String(s.cfg.Table),
		KeyConditionExpression:    aws.String("#pk = :pk"),
		ExpressionAttributeNames:  map[string]string{"#pk": PartitionKey, "#sk": SortKey},
		ExpressionAttributeValues: item{":pk": str(pk)},
		ProjectionExpression:      aws.String("#pk, #sk"),
		ConsistentRead:            aws.Bool(true),
	})
	if err != nil {
		return err
	}
	rest := keys[:0]
	for _, k := range keys {
		if getS(k, SortKey) != skMeta {
			rest = append(rest, k)
		}
	}
	guard := tombstoneIs(version)
	if err := s.deleteGuarded(ctx, pk, rest, guard); err != nil {
		if errors.Is(err, errGuard) {
			return nil // another Delete finished first
		}
		return err
	}
	deleteMeta := s.remove(item{PartitionKey: str(pk), SortKey: str(skMeta)}, guard)
	// Free the id with the tombstone, if the claim is the owner's: an
	// expired claim may since be another owner's.
	deleteClaim := s.remove(item{PartitionKey: str(claimKey(key.ID)), SortKey: str(skClaim)}, &condition{
		expr:   "#owner = :owner",
		names:  map[string]string{"#owner": attrOwner},
		values: item{":owner": str(key.Owner)},
	})
	err = s.transact(ctx, []types.TransactWriteItem{deleteMeta, deleteClaim})
	if failedAt(err, 1) {
		err = s.transact(ctx, []types.TransactWriteItem{deleteMeta})
	}
	if failedAt(err, 0) {
		return nil // another Delete finished first
	}
	return s.classify(err)
}

// tombstoneIs holds for the tombstone at version.
func tombstoneIs(version int64) *condition {
	c := versionIs(version)
	c.expr += " AND attribute_exists(#deleted)"
	c.names["#deleted"] = attrDeleted
	return c
}

// errGuard is a guarded delete that stopped because its guard no longer held.
var errGuard = errors.New("the session item changed")

// deleteGuarded deletes the items with the given keys, in transactions of up
// to 99 deletes that each check guard on the session item at pk: once guard
// fails, nothing more is deleted, and it returns errGuard. Transactions
// rather than batches, because a batch cannot be conditional: a delete that
// outlived its guard could remove what a later commit wrote under the same
// keys.
func (s *Store) deleteGuarded(ctx context.Context, pk string, keys []item, guard *condition) error {
	for len(keys) > 0 {
		n := min(MaxTransactionItems-1, len(keys))
		items := []types.TransactWriteItem{s.check(pk, skMeta, guard)}
		for _, k := range keys[:n] {
			items = append(items, s.remove(k, nil))
		}
		keys = keys[n:]
		if err := s.transact(ctx, items); err != nil {
			if failedAt(err, 0) {
				return errGuard
			}
			return s.classify(err)
		}
	}
	return nil
}

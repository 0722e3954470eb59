package memory

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/lambda-agent/lambda-agent/internal/ddbhistory"
)

// Commit is a session's commit that memory learns from.
type Commit struct {
	Owner, SessionID string
	// Incarnation tells the session from an earlier one under its id,
	// whose versions were the same numbers.
	Incarnation string
	Version     int64
	// At is when the commit was made: a forget after it forgets what it
	// taught.
	At time.Time
}

// Op is one change that consolidation makes to an owner's records: add
// a record (no ID), update one's text (ID and Text), or delete one (ID
// alone, Delete set).
type Op struct {
	ID     string
	Kind   string
	Text   string
	Delete bool
	// Message is the index of the message it was learned from.
	Message int
	// Always is an op of a kind recalled in every turn.
	Always bool
}

// errRace is a consolidation that lost a race with another for the owner's
// records: read them again and consolidate again.
var errRace = errors.New("memory: another extraction changed the records")

// learned reports whether c was learned from already, by a first delivery
// of its stream record.
func (s *Store) learned(ctx context.Context, c Commit) (bool, error) {
	out, err := s.client.GetItem(ctx, &dynamodb.GetItemInput{
		TableName:      aws.String(s.cfg.Table),
		Key:            s.key(c.Owner, doneKey(c)),
		ConsistentRead: aws.Bool(true),
	})
	if err != nil {
		return false, fmt.Errorf("memory: read: %w", ddbhistory.Classify(s.cfg.Table, err))
	}
	return out.Item != nil, nil
}

func doneKey(c Commit) string {
	return fmt.Sprintf("%s%s#%s#%d", skDone, c.SessionID, c.Incarnation, c.Version)
}

// apply writes ops, consolidation's changes from commit c, to the records
// of sn, as read: in one transaction, conditioned on the marker as sn read
// it, on the version of each record it changes, and on c's x# item not
// existing, which it writes. It makes room for what it adds by deleting
// the records learned longest ago past MaxRecords. A commit that a forget
// has reached writes nothing; nor does one learned from already. errRace
// is a record or the marker changed since sn.
func (s *Store) apply(ctx context.Context, sn *snapshot, c Commit, ops []Op) error {
	at := c.At.UnixMilli()
	if at <= sn.forgotAt || len(ops) == 0 {
		return nil
	}
	now := s.cfg.Now()
	live := sn.live()
	byID := map[string]Record{}
	for _, r := range live {
		byID[r.ID] = r
	}
	var writes []types.TransactWriteItem
	marker := s.key(c.Owner, skMarker)
	if sn.forgotAt == 0 {
		writes = append(writes, s.check(marker, "attribute_not_exists(#pk)", nil))
	} else {
		writes = append(writes, s.check(marker, "#at = :at", item{":at": num(sn.forgotAt)}))
	}
	done := s.key(c.Owner, doneKey(c))
	done[attrCommit] = num(at)
	done[ddbhistory.TTLAttribute] = num(now.Add(doneTTL).Unix())
	writes = append(writes, types.TransactWriteItem{Put: &types.Put{
		TableName: aws.String(s.cfg.Table), Item: done,
		ConditionExpression:      aws.String("attribute_not_exists(#pk)"),
		ExpressionAttributeNames: map[string]string{"#pk": ddbhistory.PartitionKey},
	}})
	touched, added, applied := map[string]bool{}, 0, 0
	for _, op := range ops {
		if applied == maxOps {
			break
		}
		old, known := byID[op.ID]
		switch {
		case op.ID == "":
			r := Record{ID: newID(), Kind: op.Kind, Text: op.Text, Source: Source{c.SessionID, op.Message}, UpdatedAt: now, version: 1, committed: at, always: op.Always}
			writes = append(writes, s.putRecord(c.Owner, r, 0))
			added++
		case !known || touched[op.ID]:
			continue // not the owner's, or changed once already
		case op.Delete:
			writes = append(writes, s.removeRecord(c.Owner, old))
		default:
			r := old
			r.Text, r.Source, r.UpdatedAt, r.version, r.committed = op.Text, Source{c.SessionID, op.Message}, now, old.version+1, at
			if op.Kind != "" {
				r.Kind, r.always = op.Kind, op.Always
			}
			writes = append(writes, s.putRecord(c.Owner, r, old.version))
		}
		touched[op.ID] = true
		applied++
	}
	if over := len(live) + added - MaxRecords; over > 0 {
		oldest := slices.Clone(live)
		slices.SortFunc(oldest, func(x, y Record) int { return x.UpdatedAt.Compare(y.UpdatedAt) })
		for _, r := range oldest {
			if over == 0 {
				break
			}
			if !touched[r.ID] {
				writes = append(writes, s.removeRecord(c.Owner, r))
				touched[r.ID] = true
				over--
			}
		}
	}
	_, err := s.client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: writes})
	var canceled *types.TransactionCanceledException
	switch {
	case err == nil:
		return nil
	case errors.As(err, &canceled):
		reasons := canceled.CancellationReasons
		if len(reasons) > 1 && aws.ToString(reasons[1].Code) == "ConditionalCheckFailed" {
			return nil // learned from already
		}
		for _, r := range reasons {
			switch aws.ToString(r.Code) {
			case "ConditionalCheckFailed", "TransactionConflict":
				return errRace
			}
		}
	}
	return fmt.Errorf("memory: learn from %s: %w", c.SessionID, ddbhistory.Classify(s.cfg.Table, err))
}

// check is a ConditionCheck on the item of key k.
func (s *Store) check(k item, cond string, values item) types.TransactWriteItem {
	return types.TransactWriteItem{ConditionCheck: &types.ConditionCheck{
		TableName: aws.String(s.cfg.Table), Key: k,
		ConditionExpression:       aws.String(cond),
		ExpressionAttributeNames:  namesIn(cond),
		ExpressionAttributeValues: values,
	}}
}

// putRecord writes r, on the condition that it is at version (0: absent).
func (s *Store) putRecord(owner string, r Record, version int64) types.TransactWriteItem {
	put := &types.Put{TableName: aws.String(s.cfg.Table), Item: s.encode(owner, r)}
	if version == 0 {
		put.ConditionExpression = aws.String("attribute_not_exists(#pk)")
	} else {
		put.ConditionExpression = aws.String("#v = :v")
		put.ExpressionAttributeValues = item{":v": num(version)}
	}
	put.ExpressionAttributeNames = namesIn(*put.ConditionExpression)
	return types.TransactWriteItem{Put: put}
}

// removeRecord deletes r, on the condition that it is as read.
func (s *Store) removeRecord(owner string, r Record) types.TransactWriteItem {
	return types.TransactWriteItem{Delete: &types.Delete{
		TableName: aws.String(s.cfg.Table), Key: s.key(owner, skRecord+r.ID),
		ConditionExpression:       aws.String("#v = :v"),
		ExpressionAttributeNames:  map[string]string{"#v": attrVersion},
		ExpressionAttributeValues: item{":v": num(r.version)},
	}}
}

// namesIn are the attribute names the conditions here use.
func namesIn(cond string) map[string]string {
	all := map[string]string{"#pk": ddbhistory.PartitionKey, "#at": attrForgotAt, "#v": attrVersion}
	out := map[string]string{}
	for ref, name := range all {
		if strings.Contains(cond, ref) {
			out[ref] = name
		}
	}
	return out
}

// discard deletes the records last learned from session's messages at or
// past from, from commits made before before: a rewind, an edit or a
// regeneration discarded them, or the session was deleted (from 0). A
// record learned from a later commit, the discarding one's own or a
// session's made again under its id, is kept, as is a record changed since
// it was read, which was learned again.
func (s *Store) discard(ctx context.Context, owner, session string, from int, before time.Time) error {
	sn, err := s.read(ctx, owner, true)
	if err != nil {
		return err
	}
	for _, r := range sn.records {
		if r.Source.SessionID != session || r.Source.Message < from || r.committed >= before.UnixMilli() {
			continue
		}
		_, err := s.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{
			TableName: aws.String(s.cfg.Table), Key: s.key(owner, skRecord+r.ID),
			ConditionExpression:       aws.String("#v = :v"),
			ExpressionAttributeNames:  map[string]string{"#v": attrVersion},
			ExpressionAttributeValues: item{":v": num(r.version)},
		})
		if err = ddbhistory.Classify(s.cfg.Table, err); err != nil && !errors.Is(err, ddbhistory.ErrConflict) {
			return fmt.Errorf("memory: discard: %w", err)
		}
	}
	return nil
}

package ddbhistory

import (
	"context"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/lambda-agent/lambda-agent/internal/agent"
	"golang.org/x/sync/errgroup"
)

// Redact replaces the content of stored message index with m, which must
// have the same role: the one exception to messages being written once, for
// guardrails and personal data. The session's version moves on, so a turn
// that loaded the old content cannot commit after the redaction. Redacting
// the first message replaces the session's title, which is made from it.
func (s *Store) Redact(ctx context.Context, key Key, index int, m agent.Message) error {
	if err := key.validate(); err != nil {
		return err
	}
	pk := partitionKey(key)
	now := s.cfg.Now()
	var meta, old item
	g, gctx := errgroup.WithContext(ctx)
	for sk, dst := range map[string]*item{skMeta: &meta, messageKey(index): &old} {
		g.Go(func() (err error) {
			*dst, err = s.getItem(gctx, pk, sk)
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return fmt.Errorf("ddbhistory: redact %s: %w", key.ID, err)
	}
	if sessionState(meta, now) != stateLive || old == nil || expired(old, now) {
		return fmt.Errorf("ddbhistory: redact %s message %d: %w", key.ID, index, ErrNotFound)
	}
	if role := getS(old, attrRole); role != string(m.Role) {
		return invalidArgument("message %d is a %s message, not %s", index, role, m.Role)
	}
	its, err := messageItems(pk, index, m, getN(old, attrWritten), getN(old, TTLAttribute), time.UnixMilli(getN(old, attrCreated)))
	if err != nil {
		return fmt.Errorf("ddbhistory: redact %s: %w", key.ID, err)
	}
	var items []types.TransactWriteItem
	var sizes []int
	for _, it := range its {
		items = append(items, s.put(it, nil))
		sizes = append(sizes, itemSize(it))
	}
	for p := len(its); p < int(getN(old, attrParts)); p++ {
		items = append(items, s.remove(item{PartitionKey: str(pk), SortKey: str(partKey(index, p))}, nil))
		sizes = append(sizes, 0)
	}
	v := versionIs(getN(meta, attrVersion))
	v.values[":one"] = num(1)
	update := "SET #version = #version + :one"
	if index == 0 {
		v.names["#title"] = attrTitle
		if title := titleOf([]agent.Message{m}); title != "" {
			update += ", #title = :title"
			v.values[":title"] = str(title)
		} else {
			update += " REMOVE #title"
		}
	}
	items = append(items, types.TransactWriteItem{Update: &types.Update{
		TableName:                 aws.String(s.cfg.Table),
		Key:                       item{PartitionKey: str(pk), SortKey: str(skMeta)},
		UpdateExpression:          aws.String(update),
		ConditionExpression:       aws.String(v.expr),
		ExpressionAttributeNames:  v.names,
		ExpressionAttributeValues: v.values,
	}})
	sizes = append(sizes, itemSize(meta))
	if err := checkTransaction(sizes); err != nil {
		return fmt.Errorf("ddbhistory: redact %s: %w", key.ID, err)
	}
	if _, err := s.client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: items}, s.retries); err != nil {
		return fmt.Errorf("ddbhistory: redact %s: %w", key.ID, s.classify(err))
	}
	return nil
}

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/lambda-agent/lambda-agent/internal/ddbhistory"
	"github.com/lambda-agent/lambda-agent/internal/testkit"
	"github.com/lambda-agent/lambda-agent/internal/testkit/dynamodbtest"
)

// wholeHistory is the layout of popular chat-history classes (LangChain's
// DynamoDBChatMessageHistory among them): one item per session holding
// every message in a list. A turn reads the item and appends its messages
// with list_append. It is built here only to be measured beside ours.
type wholeHistory struct {
	client *dynamodb.Client
	table  string
}

func (w wholeHistory) key(id string) map[string]types.AttributeValue {
	return map[string]types.AttributeValue{
		ddbhistory.PartitionKey: &types.AttributeValueMemberS{Value: id},
		ddbhistory.SortKey:      &types.AttributeValueMemberS{Value: "history"},
	}
}

func message(role, text string) types.AttributeValue {
	content, _ := json.Marshal(map[string]string{"text": text})
	return &types.AttributeValueMemberM{Value: map[string]types.AttributeValue{
		"type": &types.AttributeValueMemberS{Value: role},
		"data": &types.AttributeValueMemberS{Value: string(content)},
	}}
}

// size is an item's size by DynamoDB's rules, for the 400 KB check that
// minidyn does not make.
func size(item map[string]types.AttributeValue) int {
	var value func(types.AttributeValue) int
	value = func(v types.AttributeValue) int {
		switch v := v.(type) {
		case *types.AttributeValueMemberS:
			return len(v.Value)
		case *types.AttributeValueMemberL:
			n := 3
			for _, e := range v.Value {
				n += 1 + value(e)
			}
			return n
		case *types.AttributeValueMemberM:
			n := 3
			for k, e := range v.Value {
				n += 1 + len(k) + value(e)
			}
			return n
		}
		return 1
	}
	n := 0
	for k, v := range item {
		n += len(k) + value(v)
	}
	return n
}

// fill stores n messages; it fails as DynamoDB would past 400 KB.
func (w wholeHistory) fill(ctx context.Context, id string, n int) error {
	list := make([]types.AttributeValue, 0, n)
	for i := 0; len(list) < n; i++ {
		list = append(list, message("human", fmt.Sprintf("question %06d", i)), message("ai", fmt.Sprintf("answer %06d", i)))
	}
	item := w.key(id)
	item["History"] = &types.AttributeValueMemberL{Value: list}
	if s := size(item); s > ddbhistory.MaxItemBytes {
		return fmt.Errorf("the item would be %d KB, over DynamoDB's 400 KB", s/1024)
	}
	_, err := w.client.PutItem(ctx, &dynamodb.PutItemInput{TableName: aws.String(w.table), Item: item})
	return err
}

// turn reads the whole history and appends a question and its answer.
func (w wholeHistory) turn(ctx context.Context, id string, i int) error {
	got, err := w.client.GetItem(ctx, &dynamodb.GetItemInput{TableName: aws.String(w.table), Key: w.key(id), ConsistentRead: aws.Bool(true)})
	if err != nil {
		return err
	}
	_ = got.Item // the model would be sent all of it
	_, err = w.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
		TableName:        aws.String(w.table),
		Key:              w.key(id),
		UpdateExpression: aws.String("SET History = list_append(History, :new)"),
		ExpressionAttributeValues: map[string]types.AttributeValue{":new": &types.AttributeValueMemberL{Value: []types.AttributeValue{
			message("human", fmt.Sprintf("question %06d", i)), message("ai", fmt.Sprintf("answer %06d", i)),
		}}},
		ReturnValues: types.ReturnValueAllNew, // so the meter can count the WCU of the whole item
	})
	return err
}

func baselineCosts(ctx context.Context, cfg config, b *strings.Builder, ours map[int]dynamodbtest.Usage) error {
	b.WriteString("#### Against a whole-history-in-one-item store\n\nThe same plain turns against a store that keeps the history in one item and appends with `list_append`, the way popular chat-history classes do. It runs in the same process and is metered the same way. An update is charged WCU for the whole item.\n\n")
	b.WriteString("| stored messages | requests | bytes | RCU | WCU | lambda-agent: bytes, RCU, WCU | bytes ratio |\n|---|---|---|---|---|---|---|\n")
	for _, n := range sizes {
		ddb, err := dynamodbtest.NewServer("")
		if err != nil {
			return err
		}
		meter := &dynamodbtest.Meter{}
		w := wholeHistory{client: ddb.Client(func(o *dynamodb.Options) { o.HTTPClient = &http.Client{Transport: meter} }), table: testkit.Table}
		if err := ddbhistory.CreateTable(ctx, ddb.Client(), testkit.Table); err != nil {
			ddb.Close()
			return err
		}
		u := ours[n]
		t := float64(cfg.costTurns)
		mine := fmt.Sprintf("%.0f B, %.1f, %.1f", float64(u.Sent+u.Received)/t, u.RCU/t, u.WCU/t)
		id := fmt.Sprintf("whole-%d", n)
		if err := w.fill(ctx, id, n); err != nil {
			fmt.Fprintf(b, "| %d | fails: %v | | | | %s | |\n", n, err, mine)
			ddb.Close()
			continue
		}
		meter.Take()
		for i := 0; err == nil && i < cfg.costTurns; i++ {
			err = w.turn(ctx, id, n+i)
		}
		theirs := meter.Take()
		ddb.Close()
		if err != nil {
			return err
		}
		bytes := float64(theirs.Sent+theirs.Received) / t
		fmt.Fprintf(b, "| %d | %.1f | %.0f B | %.1f | %.1f | %s | %.1f× |\n", n, float64(theirs.Requests)/t, bytes, theirs.RCU/t, theirs.WCU/t, mine, bytes/(float64(u.Sent+u.Received)/t))
	}
	b.WriteString("\n")
	return nil
}

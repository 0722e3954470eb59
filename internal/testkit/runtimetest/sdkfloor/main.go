// Command sdkfloor is the cold-start floor of a chat function built on the
// AWS SDK for Go v2. At init it builds DynamoDB and Bedrock clients from the
// environment, as the chat function does; each event gets the four requests
// of a first chat turn, with nothing of a chat function's own around them: a
// Query and a GetItem, a Converse call and a TransactWriteItems of two
// items. The bench compares the chat function with it, so that the time the
// SDK takes is told apart from the time lambda-agent adds.
//
// TABLE_NAME and MODEL_ID name the table and the model. The table's keys are
// ddbhistory's, spelled out rather than imported, so that nothing of
// lambda-agent is linked; a request with other names would fail.
package main

import (
	"context"
	"encoding/json"
	"os"
	"strconv"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	brtypes "github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

func main() {
	cfg, err := config.LoadDefaultConfig(context.Background())
	if err != nil {
		panic(err)
	}
	f := &floor{
		ddb:     dynamodb.NewFromConfig(cfg),
		bedrock: bedrockruntime.NewFromConfig(cfg),
		table:   os.Getenv("TABLE_NAME"),
		model:   os.Getenv("MODEL_ID"),
	}
	lambda.Start(f.handle)
}

const partitionKey, sortKey = "pk", "sk"

type floor struct {
	ddb     *dynamodb.Client
	bedrock *bedrockruntime.Client
	table   string
	model   string
}

func (f *floor) handle(ctx context.Context, _ json.RawMessage) (string, error) {
	pk := "floor#" + strconv.FormatInt(time.Now().UnixNano(), 36)
	key := func(sk string) map[string]types.AttributeValue {
		return map[string]types.AttributeValue{
			partitionKey: &types.AttributeValueMemberS{Value: pk},
			sortKey:      &types.AttributeValueMemberS{Value: sk},
		}
	}
	if _, err := f.ddb.Query(ctx, &dynamodb.QueryInput{
		TableName:                 &f.table,
		KeyConditionExpression:    aws.String("#pk = :pk"),
		ExpressionAttributeNames:  map[string]string{"#pk": partitionKey},
		ExpressionAttributeValues: map[string]types.AttributeValue{":pk": &types.AttributeValueMemberS{Value: pk}},
		ScanIndexForward:          aws.Bool(false),
		ConsistentRead:            aws.Bool(true),
	}); err != nil {
		return "", err
	}
	if _, err := f.ddb.GetItem(ctx, &dynamodb.GetItemInput{TableName: &f.table, Key: key("claim"), ConsistentRead: aws.Bool(true)}); err != nil {
		return "", err
	}
	out, err := f.bedrock.Converse(ctx, &bedrockruntime.ConverseInput{
		ModelId: &f.model,
		Messages: []brtypes.Message{{
			Role:    brtypes.ConversationRoleUser,
			Content: []brtypes.ContentBlock{&brtypes.ContentBlockMemberText{Value: "Hello"}},
		}},
	})
	if err != nil {
		return "", err
	}
	answer := ""
	if m, ok := out.Output.(*brtypes.ConverseOutputMemberMessage); ok && len(m.Value.Content) > 0 {
		if t, ok := m.Value.Content[0].(*brtypes.ContentBlockMemberText); ok {
			answer = t.Value
		}
	}
	var writes []types.TransactWriteItem
	for _, sk := range []string{"m#0000000000", "m#0000000001"} {
		writes = append(writes, types.TransactWriteItem{Put: &types.Put{TableName: &f.table, Item: key(sk)}})
	}
	if _, err := f.ddb.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{TransactItems: writes}); err != nil {
		return "", err
	}
	return answer, nil
}

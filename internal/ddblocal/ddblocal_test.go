package ddblocal_test

import (
	"errors"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	"github.com/lambda-agent/lambda-agent/internal/ddbhistory"
	"github.com/lambda-agent/lambda-agent/internal/ddblocal"
)

// TestBetweenBoundsAreChecked holds the server to DynamoDB's rule that a key
// condition's BETWEEN has its lower bound first.
func TestBetweenBoundsAreChecked(t *testing.T) {
	srv, err := ddblocal.NewServer("")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	client := srv.Client()
	if err := ddbhistory.CreateTable(t.Context(), client, "t"); err != nil {
		t.Fatal(err)
	}
	query := func(lo, hi string) error {
		_, err := client.Query(t.Context(), &dynamodb.QueryInput{
			TableName:              aws.String("t"),
			KeyConditionExpression: aws.String("pk = :pk AND sk BETWEEN :lo AND :hi"),
			ExpressionAttributeValues: map[string]types.AttributeValue{
				":pk": &types.AttributeValueMemberS{Value: "p"},
				":lo": &types.AttributeValueMemberS{Value: lo},
				":hi": &types.AttributeValueMemberS{Value: hi},
			},
		})
		return err
	}
	if err := query("a", "b"); err != nil {
		t.Errorf("bounds in order: %v", err)
	}
	if err := query("b", "b"); err != nil {
		t.Errorf("equal bounds: %v", err)
	}
	var api smithy.APIError
	if err := query("m#9999999999", "m#10000000098"); !errors.As(err, &api) || api.ErrorCode() != "ValidationException" {
		t.Errorf("bounds the wrong way round: %v, want ValidationException", err)
	}
}

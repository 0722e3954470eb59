package dynamodbtest_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
	"github.com/lambda-agent/lambda-agent/internal/ddbhistory"
	"github.com/lambda-agent/lambda-agent/internal/testkit/dynamodbtest"
)

// TestBetweenBoundsAreChecked holds the server to DynamoDB's rule that a key
// condition's BETWEEN has its lower bound first.
func TestBetweenBoundsAreChecked(t *testing.T) {
	srv, err := dynamodbtest.NewServer("")
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

// TestTablesCreatedWhileOthersAreServed creates tables while other requests
// are served, as parallel tests sharing one server do. minidyn's table map
// has no lock of its own; under -race this fails unless the server guards it.
func TestTablesCreatedWhileOthersAreServed(t *testing.T) {
	srv, err := dynamodbtest.NewServer("")
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	client := srv.Client()
	if err := ddbhistory.CreateTable(t.Context(), client, "busy"); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for i := range 8 {
		wg.Go(func() {
			errs <- ddbhistory.CreateTable(t.Context(), client, fmt.Sprintf("t%d", i))
		})
		wg.Go(func() {
			_, err := client.GetItem(t.Context(), &dynamodb.GetItemInput{
				TableName: aws.String("busy"),
				Key: map[string]types.AttributeValue{
					ddbhistory.PartitionKey: &types.AttributeValueMemberS{Value: "p"},
					ddbhistory.SortKey:      &types.AttributeValueMemberS{Value: "s"},
				},
			})
			errs <- err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}

package testkit_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/lambda-agent/lambda-agent/internal/testkit"
	"github.com/lambda-agent/lambda-agent/internal/testkit/conversetest"
)

func TestBackends(t *testing.T) {
	for _, noTable := range []bool{false, true} {
		var model *conversetest.Server
		b := testkit.StartBackends(t, testkit.BackendOptions{NoTable: noTable, Model: func() *conversetest.Server {
			model = conversetest.NewServer()
			return model
		}})
		if b.Model != model {
			t.Errorf("NoTable %v: the model is not the one Model started", noTable)
		}
		for _, kv := range []string{
			"TABLE_NAME=" + testkit.Table,
			"AWS_ENDPOINT_URL_DYNAMODB=" + b.DDB.URL,
			"AWS_ENDPOINT_URL_BEDROCK_RUNTIME=" + b.Model.URL,
		} {
			if !slices.Contains(b.Env, kv) {
				t.Errorf("NoTable %v: Env %q lacks %s", noTable, b.Env, kv)
			}
		}
		_, err := b.DDB.Client().DescribeTable(t.Context(), &dynamodb.DescribeTableInput{TableName: aws.String(testkit.Table)})
		var missing *types.ResourceNotFoundException
		if errors.As(err, &missing) != noTable {
			t.Errorf("NoTable %v: DescribeTable: %v", noTable, err)
		}
	}
}

package testkit

import (
	"context"
	"testing"

	"github.com/lambda-agent/lambda-agent/internal/ddbhistory"
	"github.com/lambda-agent/lambda-agent/internal/testkit/conversetest"
	"github.com/lambda-agent/lambda-agent/internal/testkit/dynamodbtest"
)

// BackendOptions configure Backends. The zero value is the session table
// on the in-process DynamoDB and the strict Converse stand-in.
type BackendOptions struct {
	// Model starts the model's stand-in, such as offline.NewServer; nil
	// means conversetest.NewServer. Backends closes what it returns.
	Model func() *conversetest.Server
	// NoTable leaves the session table uncreated, though TABLE_NAME still
	// names it, to see a function meet a missing table.
	NoTable bool
}

// Backends are the stand-ins for a built function, such as a bootstrap
// binary, which reaches them only through its environment: the SDK's
// endpoint variables, as on a developer's machine.
type Backends struct {
	// DDB is the in-process DynamoDB.
	DDB *dynamodbtest.Server
	// Model is the Converse stand-in.
	Model *conversetest.Server
	// Env points a function at them, as "NAME=value": TABLE_NAME, the
	// region, fake credentials and the two endpoints. The function's own
	// settings, such as MODEL_ID, are the caller's to add.
	Env []string
}

// NewBackends starts Backends. Close them when done.
func NewBackends(ctx context.Context, opts BackendOptions) (*Backends, error) {
	ddb, err := dynamodbtest.NewServer("")
	if err != nil {
		return nil, err
	}
	if !opts.NoTable {
		if err := ddbhistory.CreateTable(ctx, ddb.Client(), Table); err != nil {
			ddb.Close()
			return nil, err
		}
	}
	start := opts.Model
	if start == nil {
		start = conversetest.NewServer
	}
	model := start()
	return &Backends{DDB: ddb, Model: model, Env: []string{
		"TABLE_NAME=" + Table,
		"AWS_REGION=us-east-1",
		"AWS_ACCESS_KEY_ID=test",
		"AWS_SECRET_ACCESS_KEY=test",
		"AWS_ENDPOINT_URL_DYNAMODB=" + ddb.URL,
		"AWS_ENDPOINT_URL_BEDROCK_RUNTIME=" + model.URL,
	}}, nil
}

// StartBackends starts Backends for a test, and closes them when the test
// ends, failing the test if a function sent a request that Bedrock would
// reject.
func StartBackends(t testing.TB, opts BackendOptions) *Backends {
	t.Helper()
	b, err := NewBackends(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	closeAtEnd(t, b.Model, b.Close)
	return b
}

// Close stops the stand-ins.
func (b *Backends) Close() {
	b.Model.Close()
	b.DDB.Close()
}

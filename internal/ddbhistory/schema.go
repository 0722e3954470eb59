package ddbhistory

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
)

// The table's key schema and TTL attribute. This is the one definition: the
// SAM template, the local run and the tests all follow it.
const (
	PartitionKey = "pk"
	SortKey      = "sk"
	TTLAttribute = "expires_at"
)

// Sort keys and their prefixes.
const (
	skMeta    = "meta"
	skMessage = "m#"
	skClaim   = "claim"
	// skAgent starts the keys of a sub-agent's conversation: see keyspace.
	skAgent = "a#"
	// indexDigits pads message indexes so that sort keys order numerically.
	indexDigits = 10
)

// OwnerIndex is the global secondary index that lists an owner's sessions,
// newest first. Its keys are the session item's owner and creation time,
// which no other item has both of, so it holds session items only; and it
// projects only attributes that a session's first commit sets and later ones
// keep, so a turn never writes to it: listing costs a turn nothing.
const OwnerIndex = "by_owner"

// TableDefinition returns the CreateTable input for a sessions table named
// name: string partition and sort keys, OwnerIndex, on-demand capacity.
func TableDefinition(name string) *dynamodb.CreateTableInput {
	return &dynamodb.CreateTableInput{
		TableName: aws.String(name),
		AttributeDefinitions: []types.AttributeDefinition{
			{AttributeName: aws.String(PartitionKey), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String(SortKey), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String(attrOwner), AttributeType: types.ScalarAttributeTypeS},
			{AttributeName: aws.String(attrCreated), AttributeType: types.ScalarAttributeTypeN},
		},
		KeySchema: []types.KeySchemaElement{
			{AttributeName: aws.String(PartitionKey), KeyType: types.KeyTypeHash},
			{AttributeName: aws.String(SortKey), KeyType: types.KeyTypeRange},
		},
		GlobalSecondaryIndexes: []types.GlobalSecondaryIndex{{
			IndexName: aws.String(OwnerIndex),
			KeySchema: []types.KeySchemaElement{
				{AttributeName: aws.String(attrOwner), KeyType: types.KeyTypeHash},
				{AttributeName: aws.String(attrCreated), KeyType: types.KeyTypeRange},
			},
			Projection: &types.Projection{
				ProjectionType:   types.ProjectionTypeInclude,
				NonKeyAttributes: []string{attrSessionID, attrTitle},
			},
		}},
		BillingMode: types.BillingModePayPerRequest,
	}
}

// TableAPI is what CreateTable needs of a DynamoDB client.
type TableAPI interface {
	CreateTable(context.Context, *dynamodb.CreateTableInput, ...func(*dynamodb.Options)) (*dynamodb.CreateTableOutput, error)
	DescribeTable(context.Context, *dynamodb.DescribeTableInput, ...func(*dynamodb.Options)) (*dynamodb.DescribeTableOutput, error)
	UpdateTimeToLive(context.Context, *dynamodb.UpdateTimeToLiveInput, ...func(*dynamodb.Options)) (*dynamodb.UpdateTimeToLiveOutput, error)
}

// CreateTable creates the sessions table if it does not exist and waits until
// it is active. It then turns TTL on, but does not fail if that is not
// supported: local DynamoDB stand-ins often lack it, and reads ignore expired
// items anyway.
func CreateTable(ctx context.Context, client TableAPI, name string) error {
	_, err := client.CreateTable(ctx, TableDefinition(name))
	var inUse *types.ResourceInUseException
	if err != nil && !errors.As(err, &inUse) {
		return fmt.Errorf("ddbhistory: create table %s: %w", name, err)
	}
	for {
		out, err := client.DescribeTable(ctx, &dynamodb.DescribeTableInput{TableName: aws.String(name)})
		if err != nil {
			return fmt.Errorf("ddbhistory: describe table %s: %w", name, err)
		}
		if out.Table == nil || out.Table.TableStatus == "" || out.Table.TableStatus == types.TableStatusActive {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	_, _ = client.UpdateTimeToLive(ctx, &dynamodb.UpdateTimeToLiveInput{
		TableName: aws.String(name),
		TimeToLiveSpecification: &types.TimeToLiveSpecification{
			AttributeName: aws.String(TTLAttribute),
			Enabled:       aws.Bool(true),
		},
	})
	return nil
}

// partitionKey is the key shared by every item of a session. The session id
// cannot contain '#', so the key splits unambiguously at its last '#'.
func partitionKey(k Key) string { return "s#" + k.Owner + "#" + k.ID }

// claimKey is the partition of the claim that makes a session id unique
// across owners.
func claimKey(id string) string { return "id#" + id }

// messageKey is the sort key of message i, or of its first part.
func messageKey(i int) string { return fmt.Sprintf("%s%0*d", skMessage, indexDigits, i) }

// partKey is the sort key of a further part of message i.
func partKey(i, part int) string { return fmt.Sprintf("%s#%03d", messageKey(i), part) }

// keyspace is where a conversation's items sort within its session's
// partition: the main agent's at the top, mainKeys, and each sub-agent's
// under "a#" + its name + "#" (agentKeys), in the same layout. A
// sub-agent's keys all sort before "m#", outside the range of the main
// window's query, so that they never take a message's place in its reads.
// Agent names cannot contain '#', so no keyspace holds another's.
type keyspace string

// mainKeys is the main agent's keyspace.
const mainKeys keyspace = ""

// agentKeys is the keyspace of the sub-agent name's conversation.
func agentKeys(name string) keyspace { return keyspace(skAgent + name + "#") }

// name is the name of the sub-agent whose keyspace ks is; "" for
// mainKeys.
func (ks keyspace) name() string {
	return strings.TrimSuffix(strings.TrimPrefix(string(ks), skAgent), "#")
}

// meta is the sort key of the keyspace's conversation item.
func (ks keyspace) meta() string { return string(ks) + skMeta }

// message is the sort key of the keyspace's message i, and part of a
// further part of it.
func (ks keyspace) message(i int) string { return string(ks) + messageKey(i) }
func (ks keyspace) part(i, p int) string { return string(ks) + partKey(i, p) }

// last is the highest sort key the keyspace's message i and its parts can
// have.
func (ks keyspace) last(i int) string { return string(ks) + lastKeyOf(i) }

// parse returns the message index and part of a sort key of the keyspace.
func (ks keyspace) parse(sk string) (index, part int, ok bool) {
	rest, ok := strings.CutPrefix(sk, string(ks))
	if !ok {
		return 0, 0, false
	}
	return parseMessageKey(rest)
}

// parseMessageKey returns the message index and part of a message sort key.
func parseMessageKey(sk string) (index, part int, ok bool) {
	rest, found := strings.CutPrefix(sk, skMessage)
	if !found || len(rest) < indexDigits {
		return 0, 0, false
	}
	index, err := strconv.Atoi(rest[:indexDigits])
	if err != nil {
		return 0, 0, false
	}
	if rest = rest[indexDigits:]; rest == "" {
		return index, 0, true
	}
	part, err = strconv.Atoi(strings.TrimPrefix(rest, "#"))
	if err != nil || !strings.HasPrefix(rest, "#") {
		return 0, 0, false
	}
	return index, part, true
}

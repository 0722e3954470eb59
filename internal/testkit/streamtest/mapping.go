package streamtest

import (
	"context"
	"fmt"
	"maps"
	"reflect"
	"sync"
	"time"

	"github.com/aws/aws-lambda-go/events"
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/lambda-agent/lambda-agent/internal/ddbhistory"
)

// Client is what the sessions store and memory ask of DynamoDB; a Mapping
// is one, and passes every call to the client it wraps.
type Client = ddbhistory.DynamoDBAPI

// Handler is a stream function's handler, which reports partial batch
// failures.
type Handler func(context.Context, events.DynamoDBEvent) (events.DynamoDBEventResponse, error)

// Config configures a Mapping, as an event source mapping is configured.
type Config struct {
	// Table is the table whose writes are recorded.
	Table string
	// Images reads the items' images before and after a write; nil means
	// the client the Mapping wraps. A stream costs the writer nothing, so
	// a metered client's reads should not count them.
	Images Client
	// Watch chooses the items whose changes are recorded, by key; the
	// stream has every item's, but recording one costs two reads.
	Watch func(pk, sk string) bool
	// Filters are the mapping's filter patterns (FilterCriteria): only
	// the records one of them matches reach Handler. None passes all.
	Filters []string
	// Handler gets the records, BatchSize at a time.
	Handler Handler
	// BatchSize is 10 when 0.
	BatchSize int
	// MaxRetries is how often a failing record is delivered again before
	// it goes to the on-failure destination (Failed); 2 when 0.
	MaxRetries int
}

// Mapping records a table's stream and delivers it, in order, as a
// DynamoDB event source mapping with ReportBatchItemFailures does.
type Mapping struct {
	Client
	cfg Config

	write sync.Mutex // one watched write at a time, so images are exact

	mu        sync.Mutex
	cond      *sync.Cond
	queue     []events.DynamoDBEventRecord
	busy      bool
	seq       int64
	delivered []events.DynamoDBEventRecord
	failed    []events.DynamoDBEventRecord
	err       error
}

// New returns a Mapping that passes calls to client.
func New(client Client, cfg Config) *Mapping {
	if cfg.BatchSize == 0 {
		cfg.BatchSize = 10
	}
	if cfg.MaxRetries == 0 {
		cfg.MaxRetries = 2
	}
	m := &Mapping{Client: client, cfg: cfg}
	m.cond = sync.NewCond(&m.mu)
	return m
}

// Drain waits until every record so far was handled, or sent to the
// on-failure destination. It returns a filter's error, if one failed.
func (m *Mapping) Drain(ctx context.Context) error {
	done := make(chan struct{})
	go func() {
		m.mu.Lock()
		for len(m.queue) > 0 || m.busy {
			m.cond.Wait()
		}
		m.mu.Unlock()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		return ctx.Err()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.err
}

// Delivered returns the records the filter passed, in order.
func (m *Mapping) Delivered() []events.DynamoDBEventRecord {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]events.DynamoDBEventRecord(nil), m.delivered...)
}

// Failed returns the records that went to the on-failure destination.
func (m *Mapping) Failed() []events.DynamoDBEventRecord {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]events.DynamoDBEventRecord(nil), m.failed...)
}

// watched returns the keys among keys that the mapping records.
func (m *Mapping) watched(keys ...map[string]types.AttributeValue) []map[string]types.AttributeValue {
	var out []map[string]types.AttributeValue
	for _, k := range keys {
		pk, _ := k["pk"].(*types.AttributeValueMemberS)
		sk, _ := k["sk"].(*types.AttributeValueMemberS)
		if pk != nil && sk != nil && m.cfg.Watch(pk.Value, sk.Value) {
			out = append(out, map[string]types.AttributeValue{"pk": pk, "sk": sk})
		}
	}
	return out
}

// record runs write, and records the changes it made to the items of
// keys that are watched.
func (m *Mapping) record(ctx context.Context, write func() error, keys ...map[string]types.AttributeValue) error {
	keys = m.watched(keys...)
	if len(keys) == 0 {
		return write()
	}
	m.write.Lock()
	defer m.write.Unlock()
	before := make([]map[string]types.AttributeValue, len(keys))
	for i, k := range keys {
		before[i] = m.get(ctx, k)
	}
	if err := write(); err != nil {
		return err
	}
	for i, k := range keys {
		after := m.get(ctx, k)
		if reflect.DeepEqual(before[i], after) {
			continue
		}
		name := events.DynamoDBOperationTypeModify
		switch {
		case before[i] == nil:
			name = events.DynamoDBOperationTypeInsert
		case after == nil:
			name = events.DynamoDBOperationTypeRemove
		}
		m.publish(string(name), k, before[i], after)
	}
	return nil
}

func (m *Mapping) get(ctx context.Context, key map[string]types.AttributeValue) map[string]types.AttributeValue {
	reader := m.cfg.Images
	if reader == nil {
		reader = m.Client
	}
	out, err := reader.GetItem(context.WithoutCancel(ctx), &dynamodb.GetItemInput{TableName: aws.String(m.cfg.Table), Key: key, ConsistentRead: aws.Bool(true)})
	if err != nil {
		return nil
	}
	return out.Item
}

// publish queues a stream record, if the filter passes it.
func (m *Mapping) publish(name string, keys, old, now map[string]types.AttributeValue) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.seq++
	r := events.DynamoDBEventRecord{
		EventID: fmt.Sprintf("%d", m.seq), EventName: name, EventSource: "aws:dynamodb", EventVersion: "1.1", AWSRegion: "us-east-1",
		Change: events.DynamoDBStreamRecord{
			ApproximateCreationDateTime: events.SecondsEpochTime{Time: time.Now()},
			Keys:                        toEvent(keys), NewImage: toEvent(now), OldImage: toEvent(old),
			SequenceNumber: fmt.Sprintf("%021d", m.seq), StreamViewType: "NEW_AND_OLD_IMAGES",
		},
	}
	if len(m.cfg.Filters) > 0 {
		pass := false
		for _, f := range m.cfg.Filters {
			ok, err := Match(f, r)
			if err != nil {
				m.err = err
			}
			pass = pass || ok
		}
		if !pass {
			return
		}
	}
	m.delivered = append(m.delivered, r)
	m.queue = append(m.queue, r)
	if !m.busy {
		m.busy = true
		go m.deliver()
	}
}

// deliver hands the queue to the handler until it is empty.
func (m *Mapping) deliver() {
	tries := 0
	for {
		m.mu.Lock()
		if len(m.queue) == 0 {
			m.busy = false
			m.cond.Broadcast()
			m.mu.Unlock()
			return
		}
		batch := append([]events.DynamoDBEventRecord(nil), m.queue[:min(len(m.queue), m.cfg.BatchSize)]...)
		m.mu.Unlock()

		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		resp, err := m.cfg.Handler(ctx, events.DynamoDBEvent{Records: batch})
		cancel()
		handled := len(batch) // records done with, from the batch's start
		if err != nil {
			handled = 0
		} else if len(resp.BatchItemFailures) > 0 {
			handled = 0
			for i, r := range batch {
				if r.Change.SequenceNumber == resp.BatchItemFailures[0].ItemIdentifier {
					handled = i
				}
			}
		}
		m.mu.Lock()
		m.queue = m.queue[handled:]
		if handled < len(batch) {
			if tries++; tries > m.cfg.MaxRetries {
				m.failed = append(m.failed, m.queue[0])
				m.queue, tries = m.queue[1:], 0
			}
		} else {
			tries = 0
		}
		m.mu.Unlock()
	}
}

// PutItem puts the item, and records the change if the item is watched.
func (m *Mapping) PutItem(ctx context.Context, in *dynamodb.PutItemInput, opts ...func(*dynamodb.Options)) (out *dynamodb.PutItemOutput, err error) {
	err = m.record(ctx, func() (err error) { out, err = m.Client.PutItem(ctx, in, opts...); return err }, in.Item)
	return out, err
}

// UpdateItem updates the item, and records the change if it is watched.
func (m *Mapping) UpdateItem(ctx context.Context, in *dynamodb.UpdateItemInput, opts ...func(*dynamodb.Options)) (out *dynamodb.UpdateItemOutput, err error) {
	err = m.record(ctx, func() (err error) { out, err = m.Client.UpdateItem(ctx, in, opts...); return err }, in.Key)
	return out, err
}

// DeleteItem deletes the item, and records the change if it is watched.
func (m *Mapping) DeleteItem(ctx context.Context, in *dynamodb.DeleteItemInput, opts ...func(*dynamodb.Options)) (out *dynamodb.DeleteItemOutput, err error) {
	err = m.record(ctx, func() (err error) { out, err = m.Client.DeleteItem(ctx, in, opts...); return err }, in.Key)
	return out, err
}

// TransactWriteItems runs the transaction, and records the changes it made
// to the items that are watched.
func (m *Mapping) TransactWriteItems(ctx context.Context, in *dynamodb.TransactWriteItemsInput, opts ...func(*dynamodb.Options)) (out *dynamodb.TransactWriteItemsOutput, err error) {
	var keys []map[string]types.AttributeValue
	for _, w := range in.TransactItems {
		switch {
		case w.Put != nil:
			keys = append(keys, w.Put.Item)
		case w.Update != nil:
			keys = append(keys, w.Update.Key)
		case w.Delete != nil:
			keys = append(keys, w.Delete.Key)
		}
	}
	err = m.record(ctx, func() (err error) { out, err = m.Client.TransactWriteItems(ctx, in, opts...); return err }, keys...)
	return out, err
}

// toEvent converts an item to a stream record's image.
func toEvent(it map[string]types.AttributeValue) map[string]events.DynamoDBAttributeValue {
	if it == nil {
		return nil
	}
	out := make(map[string]events.DynamoDBAttributeValue, len(it))
	for k, v := range maps.All(it) {
		out[k] = toEventValue(v)
	}
	return out
}

func toEventValue(v types.AttributeValue) events.DynamoDBAttributeValue {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return events.NewStringAttribute(v.Value)
	case *types.AttributeValueMemberN:
		return events.NewNumberAttribute(v.Value)
	case *types.AttributeValueMemberB:
		return events.NewBinaryAttribute(v.Value)
	case *types.AttributeValueMemberBOOL:
		return events.NewBooleanAttribute(v.Value)
	case *types.AttributeValueMemberSS:
		return events.NewStringSetAttribute(v.Value)
	case *types.AttributeValueMemberNS:
		return events.NewNumberSetAttribute(v.Value)
	case *types.AttributeValueMemberL:
		l := make([]events.DynamoDBAttributeValue, len(v.Value))
		for i, x := range v.Value {
			l[i] = toEventValue(x)
		}
		return events.NewListAttribute(l)
	case *types.AttributeValueMemberM:
		return events.NewMapAttribute(toEvent(v.Value))
	default:
		return events.NewNullAttribute()
	}
}

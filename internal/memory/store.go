package memory

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/lambda-agent/lambda-agent/internal/ddbhistory"
	"github.com/lambda-agent/lambda-agent/internal/turn"
	"golang.org/x/sync/errgroup"
)

// Limits on an owner's memory. With the longest owner, MaxRecords records
// of MaxTextBytes fit one 1 MB Query page, which is what a recall reads.
const (
	MaxRecords   = 500
	MaxTextBytes = 512
	// MaxKindBytes bounds a kind's name.
	MaxKindBytes = 32
	// MaxPageSize bounds a page of List.
	MaxPageSize = 100
	// DefaultTTL is Config.TTL's default: records expire a year after
	// they were last learned.
	DefaultTTL = 365 * 24 * time.Hour
	// markerTTL is how long a forget marker is kept: longer than a stream
	// record lives (24 hours), with the retries of its batch.
	markerTTL = 7 * 24 * time.Hour
	// doneTTL is how long an x# item is kept, for the same reason.
	doneTTL = 2 * 24 * time.Hour
)

// Errors of the store.
var (
	// ErrNotFound is a record the owner does not have.
	ErrNotFound = errors.New("memory record not found")
	// ErrInvalid is a malformed cursor or limit.
	ErrInvalid = errors.New("invalid argument")
)

// DynamoDBAPI is what the store needs of a DynamoDB client.
type DynamoDBAPI interface {
	Query(context.Context, *dynamodb.QueryInput, ...func(*dynamodb.Options)) (*dynamodb.QueryOutput, error)
	TransactWriteItems(context.Context, *dynamodb.TransactWriteItemsInput, ...func(*dynamodb.Options)) (*dynamodb.TransactWriteItemsOutput, error)
	DeleteItem(context.Context, *dynamodb.DeleteItemInput, ...func(*dynamodb.Options)) (*dynamodb.DeleteItemOutput, error)
	PutItem(context.Context, *dynamodb.PutItemInput, ...func(*dynamodb.Options)) (*dynamodb.PutItemOutput, error)
	GetItem(context.Context, *dynamodb.GetItemInput, ...func(*dynamodb.Options)) (*dynamodb.GetItemOutput, error)
}

// Config configures a Store. Zero values mean the documented defaults.
type Config struct {
	// Table is the sessions table. Required.
	Table string
	// IAMOwners gives memory to owners that are IAM principals. Every
	// caller that signs as one principal shares its memory.
	IAMOwners bool
	// AnonymousIsPerson gives memory to the owner of unauthenticated
	// sessions: the local run's, whose one user is one person. Never set
	// it where anyone may call.
	AnonymousIsPerson bool
	// TTL is how long a record is kept after it was last learned;
	// DefaultTTL when 0, and forever when negative.
	TTL time.Duration
	// RecallBytes bounds what a recall gives a turn; DefaultRecallBytes
	// when 0.
	RecallBytes int
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// DefaultRecallBytes is Config.RecallBytes's default: about 500 tokens.
const DefaultRecallBytes = 2000

// Store reads and writes owners' memory. It is safe for concurrent use.
type Store struct {
	client DynamoDBAPI
	cfg    Config
}

// New returns a Store on cfg.Table.
func New(client DynamoDBAPI, cfg Config) (*Store, error) {
	if cfg.Table == "" {
		return nil, errors.New("memory: a table is required")
	}
	if cfg.TTL == 0 {
		cfg.TTL = DefaultTTL
	}
	cfg.RecallBytes = cmp.Or(cfg.RecallBytes, DefaultRecallBytes)
	if cfg.RecallBytes < 0 || cfg.RecallBytes > 16<<10 {
		return nil, fmt.Errorf("memory: RecallBytes %d is not between 1 and 16384", cfg.RecallBytes)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Store{client: client, cfg: cfg}, nil
}

// Has reports whether owner has memory: an owner that names one person
// (see the package comment).
func (s *Store) Has(owner string) bool {
	switch {
	case owner == "" || len(owner) > ddbhistory.MaxOwnerBytes:
		return false
	case owner == turn.Anonymous:
		return s.cfg.AnonymousIsPerson
	case strings.HasPrefix(owner, turn.IAMPrefix):
		return s.cfg.IAMOwners
	}
	return true
}

// Record is one thing memory holds of a person.
type Record struct {
	ID   string `json:"id"`
	Kind string `json:"kind"`
	Text string `json:"text"`
	// Source is where it was last learned.
	Source    Source    `json:"source"`
	UpdatedAt time.Time `json:"updated_at"`
	// ExpiresAt is when it expires; absent for a record kept forever.
	ExpiresAt *time.Time `json:"expires_at,omitempty"`

	version   int64
	committed int64 // Unix milliseconds of the commit it was learned from
	// always is a record of a kind recalled in every turn (Kind.Always),
	// as its kind was configured when it was learned.
	always bool
}

// Source is the message a record was last learned from.
type Source struct {
	SessionID string `json:"session_id"`
	Message   int    `json:"message"`
}

// Page is a page of an owner's records, in the order of their ids.
type Page struct {
	Records    []Record `json:"records"`
	NextCursor string   `json:"next_cursor,omitempty"`
}

// Attribute names and sort keys.
const (
	skMarker     = "f"
	skRecord     = "r#"
	skDone       = "x#"
	attrKind     = "kind"
	attrText     = "text"
	attrSession  = "source_session"
	attrMessage  = "source_message"
	attrUpdated  = "updated"
	attrVersion  = "v"
	attrCommit   = "committed"
	attrForgotAt = "forgot_at"
	attrAlways   = "always"
)

func partition(owner string) string { return "mem#" + owner }

// idPattern is the form of a record's id: ten characters of base32.
var idPattern = regexp.MustCompile(`^[a-z2-7]{10}$`)

func newID() string { return strings.ToLower(rand.Text()[:10]) }

type item = map[string]types.AttributeValue

func str(s string) types.AttributeValue { return &types.AttributeValueMemberS{Value: s} }
func num[T int | int64](n T) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(int64(n), 10)}
}
func getS(it item, name string) string {
	if v, ok := it[name].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}
func getN(it item, name string) int64 {
	if v, ok := it[name].(*types.AttributeValueMemberN); ok {
		n, _ := strconv.ParseInt(v.Value, 10, 64)
		return n
	}
	return 0
}

func (s *Store) key(owner, sk string) item {
	return item{ddbhistory.PartitionKey: str(partition(owner)), ddbhistory.SortKey: str(sk)}
}

// expired reports whether it has passed its TTL, which DynamoDB deletes
// late.
func (s *Store) expired(it item) bool {
	exp := getN(it, ddbhistory.TTLAttribute)
	return exp > 0 && exp <= s.cfg.Now().Unix()
}

// decode reads a record item.
func decode(it item) Record {
	r := Record{
		ID:        strings.TrimPrefix(getS(it, ddbhistory.SortKey), skRecord),
		Kind:      getS(it, attrKind),
		Text:      getS(it, attrText),
		Source:    Source{SessionID: getS(it, attrSession), Message: int(getN(it, attrMessage))},
		UpdatedAt: time.UnixMilli(getN(it, attrUpdated)).UTC(),
		version:   getN(it, attrVersion),
		committed: getN(it, attrCommit),
	}
	if b, ok := it[attrAlways].(*types.AttributeValueMemberBOOL); ok {
		r.always = b.Value
	}
	if exp := getN(it, ddbhistory.TTLAttribute); exp > 0 {
		t := time.Unix(exp, 0).UTC()
		r.ExpiresAt = &t
	}
	return r
}

// encode is the item of r, owner's.
func (s *Store) encode(owner string, r Record) item {
	it := s.key(owner, skRecord+r.ID)
	it[attrKind], it[attrText] = str(r.Kind), str(r.Text)
	it[attrSession], it[attrMessage] = str(r.Source.SessionID), num(r.Source.Message)
	it[attrUpdated], it[attrVersion], it[attrCommit] = num(r.UpdatedAt.UnixMilli()), num(r.version), num(r.committed)
	if r.always {
		it[attrAlways] = &types.AttributeValueMemberBOOL{Value: true}
	}
	if s.cfg.TTL > 0 {
		it[ddbhistory.TTLAttribute] = num(r.UpdatedAt.Add(s.cfg.TTL).Unix())
	}
	return it
}

// snapshot is an owner's memory as one read found it.
type snapshot struct {
	// forgotAt is the forget marker's time, Unix milliseconds; 0 without
	// one.
	forgotAt int64
	records  []Record
}

// live are the records a forget has not reached.
func (sn *snapshot) live() []Record {
	out := sn.records[:0:0]
	for _, r := range sn.records {
		if r.committed > sn.forgotAt {
			out = append(out, r)
		}
	}
	return out
}

// read reads owner's marker and records: one Query page, which holds
// them all (see MaxRecords). Extraction reads consistently; a recall
// need not.
func (s *Store) read(ctx context.Context, owner string, consistent bool) (*snapshot, error) {
	out, err := s.client.Query(ctx, &dynamodb.QueryInput{
		TableName:              aws.String(s.cfg.Table),
		KeyConditionExpression: aws.String("#pk = :pk AND #sk BETWEEN :lo AND :hi"),
		ExpressionAttributeNames: map[string]string{
			"#pk": ddbhistory.PartitionKey, "#sk": ddbhistory.SortKey,
		},
		ExpressionAttributeValues: item{":pk": str(partition(owner)), ":lo": str(skMarker), ":hi": str(skRecord + "~")},
		ConsistentRead:            aws.Bool(consistent),
	})
	if err != nil {
		return nil, fmt.Errorf("memory: read: %w", ddbhistory.Classify(s.cfg.Table, err))
	}
	sn := &snapshot{}
	for _, it := range out.Items {
		switch sk := getS(it, ddbhistory.SortKey); {
		case sk == skMarker:
			sn.forgotAt = getN(it, attrForgotAt)
		case strings.HasPrefix(sk, skRecord) && !s.expired(it):
			sn.records = append(sn.records, decode(it))
		}
	}
	return sn, nil
}

// List returns a page of owner's records, in the order of their ids, limit at a
// time; cursor is "" for the first page and a Page's NextCursor after.
// An owner without memory has none.
func (s *Store) List(ctx context.Context, owner, cursor string, limit int) (*Page, error) {
	if limit < 1 || limit > MaxPageSize {
		return nil, fmt.Errorf("memory: %w: limit %d is not between 1 and %d", ErrInvalid, limit, MaxPageSize)
	}
	after := skRecord
	if cursor != "" {
		raw, err := base64.RawURLEncoding.DecodeString(cursor)
		if err != nil || !idPattern.Match(raw) {
			return nil, fmt.Errorf("memory: %w: malformed cursor %q", ErrInvalid, cursor)
		}
		after = skRecord + string(raw)
	}
	page := &Page{Records: []Record{}}
	if !s.Has(owner) {
		return page, nil
	}
	sn, err := s.read(ctx, owner, true)
	if err != nil {
		return nil, err
	}
	for _, r := range sn.live() {
		if skRecord+r.ID <= after {
			continue
		}
		if len(page.Records) == limit {
			page.NextCursor = base64.RawURLEncoding.EncodeToString([]byte(page.Records[limit-1].ID))
			break
		}
		page.Records = append(page.Records, r)
	}
	return page, nil
}

// Delete deletes owner's record id: ErrNotFound if owner has none by
// that id.
func (s *Store) Delete(ctx context.Context, owner, id string) error {
	if !s.Has(owner) || !idPattern.MatchString(id) {
		return fmt.Errorf("memory: delete %s: %w", id, ErrNotFound)
	}
	_, err := s.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName:                aws.String(s.cfg.Table),
		Key:                      s.key(owner, skRecord+id),
		ConditionExpression:      aws.String("attribute_exists(#pk)"),
		ExpressionAttributeNames: map[string]string{"#pk": ddbhistory.PartitionKey},
	})
	if err = ddbhistory.Classify(s.cfg.Table, err); errors.Is(err, ddbhistory.ErrConflict) {
		return fmt.Errorf("memory: delete %s: %w", id, ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("memory: delete %s: %w", id, err)
	}
	return nil
}

// Forget forgets everything owner's memory holds. It writes the forget
// marker, then deletes every item learned from a commit made before it;
// afterwards the partition holds the marker alone, a time with no
// content, until memory learns from a later commit.
func (s *Store) Forget(ctx context.Context, owner string) error {
	if !s.Has(owner) {
		return nil
	}
	at, err := s.MarkForgotten(ctx, owner)
	if err != nil {
		return err
	}
	in := &dynamodb.QueryInput{
		TableName:                 aws.String(s.cfg.Table),
		KeyConditionExpression:    aws.String("#pk = :pk AND #sk > :marker"),
		ExpressionAttributeNames:  map[string]string{"#pk": ddbhistory.PartitionKey, "#sk": ddbhistory.SortKey, "#c": attrCommit},
		ExpressionAttributeValues: item{":pk": str(partition(owner)), ":marker": str(skMarker)},
		ProjectionExpression:      aws.String("#pk, #sk, #c"),
		ConsistentRead:            aws.Bool(true),
	}
	for {
		out, err := s.client.Query(ctx, in)
		if err != nil {
			return fmt.Errorf("memory: forget: %w", ddbhistory.Classify(s.cfg.Table, err))
		}
		g, gctx := errgroup.WithContext(ctx)
		g.SetLimit(8)
		for _, it := range out.Items {
			if getN(it, attrCommit) > at {
				continue // learned from a later commit: kept
			}
			g.Go(func() error { return s.deleteLearnedBy(gctx, it, at) })
		}
		if err := g.Wait(); err != nil {
			return fmt.Errorf("memory: forget: %w", err)
		}
		if out.LastEvaluatedKey == nil {
			return nil
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
	}
}

// MarkForgotten writes owner's forget marker, and returns its time in Unix
// milliseconds: nothing learned from a commit made before it is learned
// any more. Its stream record is how a forget-all reaches AgentCore
// Memory (ForgetFilter).
func (s *Store) MarkForgotten(ctx context.Context, owner string) (int64, error) {
	now := s.cfg.Now()
	at := now.UnixMilli()
	marker := s.key(owner, skMarker)
	marker[attrForgotAt] = num(at)
	marker[ddbhistory.TTLAttribute] = num(now.Add(markerTTL).Unix())
	_, err := s.client.PutItem(ctx, &dynamodb.PutItemInput{
		TableName: aws.String(s.cfg.Table),
		Item:      marker,
		// A forget never moves the marker back.
		ConditionExpression:       aws.String("attribute_not_exists(#pk) OR #at < :at"),
		ExpressionAttributeNames:  map[string]string{"#pk": ddbhistory.PartitionKey, "#at": attrForgotAt},
		ExpressionAttributeValues: item{":at": num(at)},
	})
	if err = ddbhistory.Classify(s.cfg.Table, err); err != nil && !errors.Is(err, ddbhistory.ErrConflict) {
		return 0, fmt.Errorf("memory: forget: %w", err)
	}
	return at, nil
}

// ForgottenBy reads a stream record's image as a forget marker: whose
// memory it marks, and when. ok is false for any other item.
func ForgottenBy(img map[string]types.AttributeValue) (owner string, at int64, ok bool) {
	owner, ok = strings.CutPrefix(getS(img, ddbhistory.PartitionKey), "mem#")
	if !ok || getS(img, ddbhistory.SortKey) != skMarker {
		return "", 0, false
	}
	return owner, getN(img, attrForgotAt), true
}

// deleteLearnedBy deletes the item of key it if it was learned from a
// commit made no later than at.
func (s *Store) deleteLearnedBy(ctx context.Context, it item, at int64) error {
	_, err := s.client.DeleteItem(ctx, &dynamodb.DeleteItemInput{
		TableName:                 aws.String(s.cfg.Table),
		Key:                       item{ddbhistory.PartitionKey: it[ddbhistory.PartitionKey], ddbhistory.SortKey: it[ddbhistory.SortKey]},
		ConditionExpression:       aws.String("attribute_not_exists(#c) OR #c <= :at"),
		ExpressionAttributeNames:  map[string]string{"#c": attrCommit},
		ExpressionAttributeValues: item{":at": num(at)},
	})
	if err = ddbhistory.Classify(s.cfg.Table, err); errors.Is(err, ddbhistory.ErrConflict) {
		return nil // rewritten by a later commit's extraction since
	}
	return err
}

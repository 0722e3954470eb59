package ddbhistory

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/lambda-agent/lambda-agent/internal/agent"
)

// Summary is a session as List shows it.
type Summary struct {
	ID        string
	Title     string
	CreatedAt time.Time
}

// SessionList is one page of an owner's sessions, newest first.
type SessionList struct {
	Sessions []Summary
	// NextCursor continues the list; empty on the last page.
	NextCursor string
}

// MaxListSize bounds a page of List.
const MaxListSize = 100

// maxTitle bounds a session's title, in runes.
const maxTitle = 80

// List returns an owner's sessions, newest first, limit at a time. cursor is
// "" for the first page and a SessionList's NextCursor for the next.
//
// It reads OwnerIndex, which DynamoDB updates shortly after a commit: a
// session created a moment ago may be missing from the list. A session that
// expired may be listed until DynamoDB's TTL deletes it, typically within a
// few days; reading it returns ErrNotFound.
func (s *Store) List(ctx context.Context, owner, cursor string, limit int) (*SessionList, error) {
	if err := (Key{Owner: owner, ID: "x"}).validate(); err != nil {
		return nil, err
	}
	if limit < 1 || limit > MaxListSize {
		return nil, invalidArgument("limit %d is not between 1 and %d", limit, MaxListSize)
	}
	in := &dynamodb.QueryInput{
		TableName:                 aws.String(s.cfg.Table),
		IndexName:                 aws.String(OwnerIndex),
		KeyConditionExpression:    aws.String("#owner = :owner"),
		ExpressionAttributeNames:  map[string]string{"#owner": attrOwner},
		ExpressionAttributeValues: item{":owner": str(owner)},
		ScanIndexForward:          aws.Bool(false),
		Limit:                     aws.Int32(int32(limit)),
	}
	if cursor != "" {
		start, err := decodeListCursor(cursor, owner)
		if err != nil {
			return nil, err
		}
		in.ExclusiveStartKey = start
	}
	out, err := s.client.Query(ctx, in, s.retries)
	if err != nil {
		return nil, fmt.Errorf("ddbhistory: list sessions: %w", s.classify(err))
	}
	list := &SessionList{Sessions: make([]Summary, 0, len(out.Items))}
	for _, it := range out.Items {
		list.Sessions = append(list.Sessions, Summary{
			ID:        getS(it, attrSessionID),
			Title:     getS(it, attrTitle),
			CreatedAt: time.UnixMilli(getN(it, attrCreated)),
		})
	}
	if len(out.LastEvaluatedKey) > 0 {
		list.NextCursor = encodeListCursor(out.LastEvaluatedKey)
	}
	return list, nil
}

// listCursor is the position in an owner's list: the last session item's
// key and creation time. The owner is not in it; it is the caller's.
type listCursor struct {
	PK      string `json:"p"`
	Created int64  `json:"c"`
}

// encodeListCursor returns the cursor that continues a list after last.
func encodeListCursor(last item) string {
	b, _ := json.Marshal(listCursor{PK: getS(last, PartitionKey), Created: getN(last, attrCreated)}) // always encodes
	return base64.RawURLEncoding.EncodeToString(b)
}

// decodeListCursor returns the start key a cursor stands for, refusing one
// that is not owner's: the position of another owner's session would
// reveal nothing, but it is no position in this list either.
func decodeListCursor(cursor, owner string) (item, error) {
	var c listCursor
	b, err := base64.RawURLEncoding.DecodeString(cursor)
	if err == nil {
		err = json.Unmarshal(b, &c)
	}
	id, mine := strings.CutPrefix(c.PK, "s#"+owner+"#")
	if err != nil || !mine || !ValidID(id) || c.Created <= 0 {
		return nil, invalidArgument("malformed cursor %q", cursor)
	}
	return item{
		PartitionKey: str(c.PK),
		SortKey:      str(skMeta),
		attrOwner:    str(owner),
		attrCreated:  num(c.Created),
	}, nil
}

// titleOf is a session's title: the start of the first text of its first
// message, on one line.
func titleOf(msgs []agent.Message) string {
	if len(msgs) == 0 {
		return ""
	}
	for _, b := range msgs[0].Content {
		if b.Text == "" {
			continue
		}
		t := strings.Join(strings.FieldsFunc(b.Text, unicode.IsSpace), " ")
		if utf8.RuneCountInString(t) <= maxTitle {
			return t
		}
		runes := []rune(t)
		return strings.TrimSpace(string(runes[:maxTitle-1])) + "…"
	}
	return ""
}

package ddbhistory

// The audit record (internal/audit) is kept in the session's own partition,
// under sort keys of its own, so that it belongs to the session's owner,
// goes with the session's delete, and needs nothing but the table:
//
//	audit#0000000004#1767225600000a1b2c3#001        a model call of the turn
//	                                                whose first message is
//	                                                message 4: DEFLATE-compressed
//	                                                JSON, and what it is
//	audit#0000000004#1767225600000a1b2c3#001#001    its further parts, for a
//	                                                record larger than one item
//
// "audit#" sorts before "m#" and "meta", and no sub-agent's keys ("a#NAME#")
// begin with it, so that no read of messages, of a sub-agent's
// conversation, or of the session item's neighbours meets an audit item.

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"golang.org/x/sync/errgroup"
)

const (
	skAudit = "audit#"
	// skAuditEnd is above every audit sort key.
	skAuditEnd = "audit#~"

	attrAuditBase      = "base_version"
	attrAuditCommitted = "committed_version"
	attrAuditOutcome   = "outcome"
	attrAuditSize      = "size"
	attrAuditRecorded  = "recorded_at"
)

// AuditOutcome is what became of the turn whose model call a record is.
type AuditOutcome string

// The outcomes of a turn.
const (
	// AuditCommitted: the turn was committed.
	AuditCommitted AuditOutcome = "committed"
	// AuditFailed: the turn failed, or lost a race, and stored nothing.
	AuditFailed AuditOutcome = "failed"
)

// AuditRecord is one model call's record, as the store keeps it.
type AuditRecord struct {
	// ID names the record within its session: the turn's first message,
	// the turn, and the call's place in the turn.
	ID string
	// At is the index of the first message of the turn the call was made
	// in (or, for a turn that stored nothing, would have been).
	At int
	// Turn tells one turn from another; Call is the call's number in
	// the turn, from 1.
	Turn string
	Call int
	// Outcome is what became of the turn.
	Outcome AuditOutcome
	// Recorded is when the record was stored.
	Recorded time.Time
	// Size is the record's JSON in bytes.
	Size int
	// JSON is the record; nil in a page where the record is too large
	// for it (AuditPage.Budget).
	JSON []byte
}

// AuditTurn is the records of one turn, for PutAudit.
type AuditTurn struct {
	// At is the index of the turn's first message.
	At int
	// Base is the session's version when the turn loaded it, and
	// Committed the version its commit made; 0 for a turn that stored
	// nothing.
	Base, Committed int64
	// Records are the JSON of its model calls, in order.
	Records [][]byte
}

// NewAuditTurn returns a new turn id: the time in milliseconds, so that a
// session's turns at one index list in the order they ran, and random
// digits that tell apart the turns of one millisecond.
func NewAuditTurn(now time.Time) string {
	var b [3]byte
	_, _ = rand.Read(b[:]) // never fails
	return fmt.Sprintf("%013d%s", now.UnixMilli(), hex.EncodeToString(b[:]))
}

// auditKey is the sort key of a record's first item.
func auditKey(at int, turn string, call int) string {
	return fmt.Sprintf("%s%0*d#%s#%03d", skAudit, indexDigits, at, turn, call)
}

// AuditID is the id of the record of call in the turn at index at.
func AuditID(at int, turn string, call int) string {
	return fmt.Sprintf("%d.%s.%d", at, turn, call)
}

// parseAuditID reverses AuditID, refusing what it cannot have made.
func parseAuditID(id string) (string, error) {
	parts := strings.Split(id, ".")
	if len(parts) == 3 && len(parts[1]) == 19 && strings.Trim(parts[1], "0123456789abcdef") == "" {
		at, err1 := strconv.Atoi(parts[0])
		call, err2 := strconv.Atoi(parts[2])
		if err1 == nil && err2 == nil && at >= 0 && at <= maxIndex && call >= 1 && call <= 999 && parts[0] == strconv.Itoa(at) && parts[2] == strconv.Itoa(call) {
			return auditKey(at, parts[1], call), nil
		}
	}
	return "", fmt.Errorf("%w: no audit record is named %q", ErrNotFound, id)
}

// parseAuditKey reads an audit sort key: the record's first item
// (part 0) or a further part.
func parseAuditKey(sk string) (at int, turn string, call, part int, ok bool) {
	fields := strings.Split(strings.TrimPrefix(sk, skAudit), "#")
	if len(fields) < 3 || len(fields) > 4 || !strings.HasPrefix(sk, skAudit) {
		return 0, "", 0, 0, false
	}
	var err error
	if at, err = strconv.Atoi(fields[0]); err != nil {
		return 0, "", 0, 0, false
	}
	if call, err = strconv.Atoi(fields[2]); err != nil {
		return 0, "", 0, 0, false
	}
	if len(fields) == 4 {
		if part, err = strconv.Atoi(fields[3]); err != nil {
			return 0, "", 0, 0, false
		}
	}
	return at, fields[1], call, part, true
}

// MaxAuditCalls bounds the records of one turn.
const MaxAuditCalls = 999

// PutAudit stores the records of a turn of sess, which must have been
// committed at least once (sess.Version > 0), each kept ttl (0: as long as
// the session's messages). A record larger than an item is stored in
// parts. The items are written at once, each with a PutItem, outside any
// transaction: a record is never a reason for a turn to fail, and a
// record whose session was deleted meanwhile is never read (see
// auditVisible) and expires. It returns the records' ids.
func (s *Store) PutAudit(ctx context.Context, sess *Session, turn string, t AuditTurn, ttl time.Duration) ([]string, error) {
	if err := sess.validate(); err != nil {
		return nil, err
	}
	switch {
	case sess.Version == 0 || sess.incarnation == "":
		return nil, invalidArgument("session %s has never been stored", sess.ID)
	case t.At < 0 || t.At > maxIndex || len(t.Records) > MaxAuditCalls:
		return nil, invalidArgument("%d records at %d", len(t.Records), t.At)
	case len(turn) != 19:
		return nil, invalidArgument("turn id %q", turn)
	}
	now := s.cfg.Now()
	if ttl <= 0 {
		ttl = s.cfg.TTL
	}
	var expires int64
	if ttl > 0 {
		expires = now.Add(ttl).Unix()
	}
	pk := partitionKey(sess.Key)
	outcome := AuditFailed
	if t.Committed > 0 {
		outcome = AuditCommitted
	}
	var items []item
	ids := make([]string, len(t.Records))
	for i, raw := range t.Records {
		call := i + 1
		ids[i] = AuditID(t.At, turn, call)
		parts := compressedParts(raw)
		head := auditKey(t.At, turn, call)
		first := item{
			PartitionKey:       str(pk),
			SortKey:            str(head),
			attrBody:           bin(parts[0]),
			attrIncarnation:    str(sess.incarnation),
			attrAuditBase:      num(t.Base),
			attrAuditCommitted: num(t.Committed),
			attrAuditOutcome:   str(string(outcome)),
			attrAuditSize:      num(len(raw)),
			attrAuditRecorded:  num(now.UnixMilli()),
			TTLAttribute:       num(expires),
		}
		if len(parts) > 1 {
			first[attrParts] = num(len(parts))
		}
		items = append(items, first)
		for p, part := range parts[1:] {
			items = append(items, item{
				PartitionKey: str(pk),
				SortKey:      str(fmt.Sprintf("%s#%03d", head, p+1)),
				attrBody:     bin(part),
				TTLAttribute: num(expires),
			})
		}
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(16)
	for _, it := range items {
		g.Go(func() error {
			_, err := s.client.PutItem(gctx, &dynamodb.PutItemInput{TableName: aws.String(s.cfg.Table), Item: it}, s.retries)
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, fmt.Errorf("ddbhistory: audit %s: %w", sess.ID, s.classify(err))
	}
	return ids, nil
}

// auditVisible reports whether the record whose first item is head is one
// of the live session meta's: of its incarnation, unexpired, and not of a
// turn its last rewind discarded, that is, at or past the message it
// rewound to and made before that rewind (by a turn whose commit, or, for
// one that stored nothing, whose load, came before it).
func auditVisible(head item, meta *Session, now time.Time) bool {
	if expired(head, now) || getS(head, attrIncarnation) != meta.incarnation {
		return false
	}
	at, _, _, _, _ := parseAuditKey(getS(head, SortKey))
	if meta.rewound == 0 || at < meta.rewoundTo {
		return true
	}
	if c := getN(head, attrAuditCommitted); c > 0 {
		return c >= meta.rewound
	}
	return getN(head, attrAuditBase) >= meta.rewound
}

// auditHeader reads what a record's first item says of it.
func auditHeader(head item) AuditRecord {
	sk := getS(head, SortKey)
	at, turn, call, _, _ := parseAuditKey(sk)
	return AuditRecord{
		ID:       AuditID(at, turn, call),
		At:       at,
		Turn:     turn,
		Call:     call,
		Outcome:  AuditOutcome(getS(head, attrAuditOutcome)),
		Recorded: time.UnixMilli(getN(head, attrAuditRecorded)).UTC(),
		Size:     int(getN(head, attrAuditSize)),
	}
}

// decodeAudit reassembles a record from its first item and its parts.
func decodeAudit(head item, parts map[int][]byte) ([]byte, error) {
	body := getB(head, attrBody)
	if n := int(getN(head, attrParts)); n > 1 {
		body = bytes.Clone(body)
		for p := 1; p < n; p++ {
			part, ok := parts[p]
			if !ok {
				return nil, fmt.Errorf("part %d of %d is missing", p, n)
			}
			body = append(body, part...)
		}
	}
	return decompress(body)
}

// AuditPage is a page of a session's audit record.
type AuditPage struct {
	// Records are the page's records, oldest turn first; a record larger
	// than the page's budget has no JSON, and is read alone with
	// AuditRecord.
	Records []AuditRecord
	// NextCursor continues the record; empty on the last page.
	NextCursor string
}

// Audit reads a page of the audit record of the live session key: at most
// limit records (1 to MaxPageSize), with their JSON while it totals no
// more than budget bytes (0: no bound). A record larger than budget comes
// without its JSON, and its parts are not read. cursor is "" or a page's
// NextCursor. It returns ErrNotFound for a session that is not live, and
// ErrInvalid for a malformed cursor or limit.
func (s *Store) Audit(ctx context.Context, key Key, cursor string, limit, budget int) (*AuditPage, error) {
	if err := key.validate(); err != nil {
		return nil, err
	}
	if limit < 1 || limit > MaxPageSize {
		return nil, invalidArgument("limit %d is not between 1 and %d", limit, MaxPageSize)
	}
	from := skAudit
	if cursor != "" {
		raw, err := base64.RawURLEncoding.DecodeString(cursor)
		if _, _, _, part, ok := parseAuditKey(string(raw)); err != nil || !ok || part != 0 {
			return nil, invalidArgument("malformed cursor %q", cursor)
		}
		from = string(raw)
	}
	meta, err := s.liveSession(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("ddbhistory: audit %s: %w", key.ID, err)
	}
	now := s.cfg.Now()
	pk := partitionKey(key)
	page := &AuditPage{}
	size := 0
	var (
		head  item // the record being read, when its parts are wanted
		parts map[int][]byte
	)
	finish := func() {
		if head == nil {
			return
		}
		r := auditHeader(head)
		if raw, err := decodeAudit(head, parts); err == nil {
			r.JSON = raw
			page.Records = append(page.Records, r)
			size += len(raw)
		}
		head = nil
	}
	in := &dynamodb.QueryInput{
		TableName:                 aws.String(s.cfg.Table),
		KeyConditionExpression:    aws.String("#pk = :pk AND #sk BETWEEN :lo AND :hi"),
		ExpressionAttributeNames:  map[string]string{"#pk": PartitionKey, "#sk": SortKey},
		ExpressionAttributeValues: item{":pk": str(pk), ":lo": str(from), ":hi": str(skAuditEnd)},
		ConsistentRead:            aws.Bool(true),
		Limit:                     aws.Int32(int32(min(limit+1, 100))),
	}
	for {
		out, err := s.client.Query(ctx, in, s.retries)
		if err != nil {
			return nil, fmt.Errorf("ddbhistory: audit %s: %w", key.ID, s.classify(err))
		}
		in.ExclusiveStartKey = out.LastEvaluatedKey
		skipped := false
		for _, it := range out.Items {
			sk := getS(it, SortKey)
			_, _, _, part, ok := parseAuditKey(sk)
			switch {
			case !ok:
				continue
			case part > 0:
				if head != nil && strings.HasPrefix(sk, getS(head, SortKey)+"#") {
					parts[part] = getB(it, attrBody)
				}
				continue
			}
			finish()
			if !auditVisible(it, meta, now) {
				if getN(it, attrParts) > 1 {
					skipParts(in, it)
					skipped = true
					break
				}
				continue
			}
			if len(page.Records) == limit {
				page.NextCursor = base64.RawURLEncoding.EncodeToString([]byte(sk))
				return page, nil
			}
			r := auditHeader(it)
			switch {
			case budget > 0 && r.Size > budget:
				page.Records = append(page.Records, r) // alone, without its JSON
				if getN(it, attrParts) <= 1 {
					continue
				}
				skipParts(in, it)
				skipped = true
			case budget > 0 && size+r.Size > budget:
				page.NextCursor = base64.RawURLEncoding.EncodeToString([]byte(sk))
				return page, nil
			default:
				head, parts = it, map[int][]byte{}
				continue
			}
			break
		}
		if in.ExclusiveStartKey == nil && !skipped {
			finish()
			return page, nil
		}
	}
}

// skipParts makes the query in go on past the record whose first item is
// head, and its parts, which it never reads. It moves the lower bound of
// the key condition, rather than start after a key that is no item's: the
// in-process DynamoDB (minidyn, the local run's and the tests') answers
// such an ExclusiveStartKey with nothing, and the page would end there.
func skipParts(in *dynamodb.QueryInput, head item) {
	in.ExpressionAttributeValues[":lo"] = str(getS(head, SortKey) + "#~")
	in.ExclusiveStartKey = nil
}

// AuditRecordOf reads one record of the live session key, whole.
// It returns ErrNotFound for a session that is not live and for a record
// that it does not have, or no longer shows.
func (s *Store) AuditRecordOf(ctx context.Context, key Key, id string) (*AuditRecord, error) {
	if err := key.validate(); err != nil {
		return nil, err
	}
	head, err := parseAuditID(id)
	if err != nil {
		return nil, err
	}
	meta, err := s.liveSession(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("ddbhistory: audit %s: %w", key.ID, err)
	}
	items, err := s.queryAll(ctx, &dynamodb.QueryInput{
		TableName:                 aws.String(s.cfg.Table),
		KeyConditionExpression:    aws.String("#pk = :pk AND #sk BETWEEN :lo AND :hi"),
		ExpressionAttributeNames:  map[string]string{"#pk": PartitionKey, "#sk": SortKey},
		ExpressionAttributeValues: item{":pk": str(partitionKey(key)), ":lo": str(head), ":hi": str(head + "#~")},
		ConsistentRead:            aws.Bool(true),
	})
	if err != nil {
		return nil, fmt.Errorf("ddbhistory: audit %s: %w", key.ID, err)
	}
	if len(items) == 0 || getS(items[0], SortKey) != head || !auditVisible(items[0], meta, s.cfg.Now()) {
		return nil, fmt.Errorf("ddbhistory: audit %s: %w: record %s", key.ID, ErrNotFound, id)
	}
	parts := map[int][]byte{}
	for _, it := range items[1:] {
		if _, _, _, p, ok := parseAuditKey(getS(it, SortKey)); ok && p > 0 {
			parts[p] = getB(it, attrBody)
		}
	}
	r := auditHeader(items[0])
	if r.JSON, err = decodeAudit(items[0], parts); err != nil {
		return nil, fmt.Errorf("ddbhistory: audit %s: record %s: %w", key.ID, id, err)
	}
	return &r, nil
}

// liveSession reads the session item of key, which must be live.
func (s *Store) liveSession(ctx context.Context, key Key) (*Session, error) {
	meta, err := s.getItem(ctx, partitionKey(key), skMeta)
	if err != nil {
		return nil, err
	}
	now := s.cfg.Now()
	if sessionState(meta, now) != stateLive {
		return nil, ErrNotFound
	}
	return decodeMeta(key, meta, now)
}

// PruneAudit deletes the records that the last rewind of sess discarded
// (see auditVisible), which reads no longer show: sess is the session as a
// rewinding commit left it. Records of another incarnation are left to
// their TTL.
func (s *Store) PruneAudit(ctx context.Context, sess *Session) error {
	if err := sess.validate(); err != nil {
		return err
	}
	if sess.rewound == 0 {
		return nil
	}
	pk := partitionKey(sess.Key)
	items, err := s.queryAll(ctx, &dynamodb.QueryInput{
		TableName:              aws.String(s.cfg.Table),
		KeyConditionExpression: aws.String("#pk = :pk AND #sk BETWEEN :lo AND :hi"),
		ExpressionAttributeNames: map[string]string{
			"#pk": PartitionKey, "#sk": SortKey, "#inc": attrIncarnation, "#base": attrAuditBase,
			"#committed": attrAuditCommitted, "#ttl": TTLAttribute,
		},
		ExpressionAttributeValues: item{":pk": str(pk), ":lo": str(auditKey(sess.rewoundTo, "", 0)), ":hi": str(skAuditEnd)},
		ProjectionExpression:      aws.String("#pk, #sk, #inc, #base, #committed, #ttl"),
		ConsistentRead:            aws.Bool(true),
	})
	if err != nil {
		return fmt.Errorf("ddbhistory: prune audit %s: %w", sess.ID, err)
	}
	now := s.cfg.Now()
	var doomed []item
	discarding := false
	for _, it := range items {
		_, _, _, part, ok := parseAuditKey(getS(it, SortKey))
		switch {
		case !ok:
		case part == 0:
			discarding = getS(it, attrIncarnation) == sess.incarnation && !auditVisible(it, sess, now)
			if discarding {
				doomed = append(doomed, it)
			}
		case discarding:
			doomed = append(doomed, it)
		}
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(16)
	for _, it := range doomed {
		g.Go(func() error {
			_, err := s.client.DeleteItem(gctx, &dynamodb.DeleteItemInput{
				TableName: aws.String(s.cfg.Table),
				Key:       item{PartitionKey: it[PartitionKey], SortKey: it[SortKey]},
			}, s.retries)
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return fmt.Errorf("ddbhistory: prune audit %s: %w", sess.ID, s.classify(err))
	}
	return nil
}

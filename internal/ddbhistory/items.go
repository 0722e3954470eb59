package ddbhistory

import (
	"bytes"
	"compress/flate"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/lambda-agent/lambda-agent/internal/agent"
)

// DynamoDB's limits, which the store enforces itself rather than trusting the
// server to: some local stand-ins accept larger items.
const (
	MaxItemBytes        = 400 * 1024
	MaxTransactionItems = 100
	MaxTransactionBytes = 4 * 1024 * 1024
	// partBytes is how much of a message body one item carries, leaving room
	// for the keys (the owner may be long) and the other attributes.
	partBytes = MaxItemBytes - 8*1024
	// MaxOwnerBytes bounds the owner, and so the partition key.
	MaxOwnerBytes = 1024
)

// Attribute names.
const (
	attrOwner       = "owner"
	attrSessionID   = "session_id"
	attrVersion     = "version"
	attrCount       = "count"
	attrWindow      = "window"
	attrState       = "state"
	attrIncarnation = "incarnation"
	attrCreated     = "created_at"
	attrUpdated     = "updated_at"
	attrRole        = "role"
	attrBody        = "body"
	attrParts       = "parts"
	attrResponse    = "response"
	attrClaimed     = "claimed_until"
	attrStatus      = "status"
	attrFingerprint = "fingerprint"
	attrFirst       = "first"
	attrToken       = "token"
	attrTitle       = "title"
	attrDeleted     = "deleted_at"
	attrWriter      = "writer"
	attrPending     = "pending"
	attrResuming    = "resuming_until"
	attrWritten     = "written"
	attrRewound     = "rewound"
	attrRewoundTo   = "rewound_to"
	attrStaged      = "staged"
	attrHeader      = "staged_header"
)

type item = map[string]types.AttributeValue

// str makes a string attribute value.
func str(s string) types.AttributeValue { return &types.AttributeValueMemberS{Value: s} }

// num makes a number attribute value.
func num[T int | int64](n T) types.AttributeValue {
	return &types.AttributeValueMemberN{Value: strconv.FormatInt(int64(n), 10)}
}

// bin makes a binary attribute value.
func bin(b []byte) types.AttributeValue { return &types.AttributeValueMemberB{Value: b} }

// getS reads a string attribute; "" when it is missing or of another type.
func getS(it item, name string) string {
	if v, ok := it[name].(*types.AttributeValueMemberS); ok {
		return v.Value
	}
	return ""
}

// getN reads a number attribute; 0 when it is missing.
func getN(it item, name string) int64 {
	if v, ok := it[name].(*types.AttributeValueMemberN); ok {
		n, _ := strconv.ParseInt(v.Value, 10, 64)
		return n
	}
	return 0
}

// getB reads a binary attribute; nil when it is missing.
func getB(it item, name string) []byte {
	if v, ok := it[name].(*types.AttributeValueMemberB); ok {
		return v.Value
	}
	return nil
}

// expired reports whether an item's TTL has passed. Zero never expires.
func expired(it item, now time.Time) bool {
	at := getN(it, TTLAttribute)
	return at > 0 && at <= now.Unix()
}

// itemSize is an item's size as DynamoDB counts it against the 400 KB limit
// and for capacity: attribute names plus values. Numbers are counted at their
// decimal length, which is never less than DynamoDB's count.
func itemSize(it item) int {
	n := 0
	for name, v := range it {
		n += len(name) + valueSize(v)
	}
	return n
}

// valueSize is an attribute value's size, as itemSize counts it.
func valueSize(v types.AttributeValue) int {
	switch v := v.(type) {
	case *types.AttributeValueMemberS:
		return len(v.Value)
	case *types.AttributeValueMemberN:
		return len(v.Value)
	case *types.AttributeValueMemberB:
		return len(v.Value)
	case *types.AttributeValueMemberBOOL, *types.AttributeValueMemberNULL:
		return 1
	case *types.AttributeValueMemberM:
		n := 3
		for k, e := range v.Value {
			n += len(k) + valueSize(e) + 1
		}
		return n
	case *types.AttributeValueMemberL:
		n := 3
		for _, e := range v.Value {
			n += valueSize(e) + 1
		}
		return n
	default:
		return 0
	}
}

// compress and decompress encode message bodies. DEFLATE shrinks JSON text
// several times over, which cuts both the bytes a turn writes and how often a
// message needs more than one item. BestSpeed compresses a message in a
// quarter of the default level's time, most of which goes into clearing its
// larger tables on every Reset, for a few percent more bytes. Writers are
// pooled, as each allocates hundreds of kilobytes.
var writers = sync.Pool{New: func() any {
	w, _ := flate.NewWriter(nil, flate.BestSpeed) // the level is valid
	return w
}}

// compress DEFLATEs b.
func compress(b []byte) []byte {
	var buf bytes.Buffer
	w := writers.Get().(*flate.Writer)
	w.Reset(&buf)
	_, _ = w.Write(b) // a bytes.Buffer does not fail
	_ = w.Close()
	writers.Put(w)
	return buf.Bytes()
}

// compressedParts DEFLATEs raw and cuts it into parts of at most
// partBytes, one an item: a message's or an audit record's.
func compressedParts(raw []byte) [][]byte {
	body := compress(raw)
	var parts [][]byte
	for len(body) > partBytes {
		parts = append(parts, body[:partBytes])
		body = body[partBytes:]
	}
	return append(parts, body)
}

// Readers are pooled too: each holds a 32 KB window and its tables, and a
// load decompresses every message of the window.
var readers = sync.Pool{New: func() any { return flate.NewReader(bytes.NewReader(nil)) }}

// decompress reverses compress.
func decompress(b []byte) ([]byte, error) {
	r := readers.Get().(io.ReadCloser)
	defer readers.Put(r)
	if err := r.(flate.Resetter).Reset(bytes.NewReader(b), nil); err != nil {
		return nil, err
	}
	return io.ReadAll(r)
}

// messageItems encodes message i of a session as one item, or as a first
// item and further parts when the body is larger than one item holds. When
// version is not 0, every item records it, the session version that the
// write makes, so that a read can tell a message rewritten after the
// session item it read: see messageSet.current.
func messageItems(pk string, ks keyspace, i int, m agent.Message, version, expires int64, now time.Time) ([]item, error) {
	raw, err := json.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encode message %d: %w", i, err)
	}
	parts := compressedParts(raw)

	first := item{
		PartitionKey: str(pk),
		SortKey:      str(ks.message(i)),
		attrRole:     str(string(m.Role)),
		attrBody:     bin(parts[0]),
		attrCreated:  num(now.UnixMilli()),
		TTLAttribute: num(expires),
	}
	if len(parts) > 1 {
		first[attrParts] = num(len(parts))
	}
	if version > 0 {
		first[attrWritten] = num(version)
	}
	items := []item{first}
	for p, part := range parts[1:] {
		it := item{
			PartitionKey: str(pk),
			SortKey:      str(ks.part(i, p+1)),
			attrBody:     bin(part),
			TTLAttribute: num(expires),
		}
		if version > 0 {
			it[attrWritten] = num(version)
		}
		items = append(items, it)
	}
	return items, nil
}

// storedMessage is a message as read back: its first item and the parts
// found so far.
type storedMessage struct {
	first item
	parts map[int][]byte
	// written holds the versions its parts were written at. The first
	// item's is in it.
	written map[int]int64
}

// decode reassembles and decodes the message. It fails when parts are
// missing, which happens only when some expired before the first item.
func (s *storedMessage) decode() (agent.Message, error) {
	m, _, err := s.decodeSized()
	return m, err
}

// decodeSized is decode, also returning the size of the message's JSON.
func (s *storedMessage) decodeSized() (agent.Message, int, error) {
	body := getB(s.first, attrBody)
	if n := int(getN(s.first, attrParts)); n > 1 {
		body = bytes.Clone(body)
		for p := 1; p < n; p++ {
			part, ok := s.parts[p]
			if !ok {
				return agent.Message{}, 0, fmt.Errorf("part %d of %d is missing", p, n)
			}
			body = append(body, part...)
		}
	}
	raw, err := decompress(body)
	if err != nil {
		return agent.Message{}, 0, fmt.Errorf("decompress: %w", err)
	}
	var m agent.Message
	if err := json.Unmarshal(raw, &m); err != nil {
		return agent.Message{}, 0, fmt.Errorf("decode: %w", err)
	}
	return m, len(raw), nil
}

// messageSet is the message items a read found, by index.
type messageSet struct {
	// ks is the keyspace of the conversation read.
	ks    keyspace
	found map[int]*storedMessage
	// expired holds the indexes whose first item has expired: absent by
	// rule, unlike a message the read did not see.
	expired map[int]bool
}

// newMessageSet returns an empty messageSet for the keyspace ks.
func newMessageSet(ks keyspace) *messageSet {
	return &messageSet{ks: ks, found: map[int]*storedMessage{}, expired: map[int]bool{}}
}

// complete reports whether message i was found whole, first item included.
func (ms *messageSet) complete(i int) bool {
	sm := ms.found[i]
	return sm != nil && sm.first != nil
}

// add groups message items by index, leaving expired ones out.
func (ms *messageSet) add(items []item, now time.Time) {
	for _, it := range items {
		index, part, ok := ms.ks.parse(getS(it, SortKey))
		if !ok {
			continue
		}
		if expired(it, now) {
			if part == 0 {
				ms.expired[index] = true
			}
			continue
		}
		sm := ms.found[index]
		if sm == nil {
			sm = &storedMessage{parts: map[int][]byte{}, written: map[int]int64{}}
			ms.found[index] = sm
		}
		if part == 0 {
			sm.first = it
		} else {
			sm.parts[part] = getB(it, attrBody)
		}
		sm.written[part] = getN(it, attrWritten)
	}
}

// current reports whether message i, as found, is the one the session item
// meta counts: none of its items was written after meta, and none before a
// rewind that discarded index i. A Query is not isolated from a
// transaction, so a read beside a commit that rewrote messages (see
// Turn.Rewind) can see some of its items and not others; such a read is
// made again. (A session that was never rewound records no versions, and
// needs none: the first rewinding commit records its own.)
//
// Only the parts the first item counts are the message's: a message that
// replaced a longer one leaves that one's further parts behind, unread.
func (ms *messageSet) current(i int, meta *Session) bool {
	sm := ms.found[i]
	if sm == nil || sm.first == nil {
		return true // not found whole: see complete
	}
	for p := range max(int(getN(sm.first, attrParts)), 1) {
		v := sm.written[p]
		if v > meta.Version || (i >= meta.rewoundTo && v < meta.rewound) {
			return false
		}
	}
	return true
}

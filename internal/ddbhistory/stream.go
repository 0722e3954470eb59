package ddbhistory

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/lambda-agent/lambda-agent/internal/agent"
)

// SessionImage is what an image of a session item, as a DynamoDB stream
// record carries it, says of the session. Only the session item (sort key
// "meta") marks a commit: its message count says which messages readers
// see, so a reader of the table's stream follows these images and never a
// message item's.
type SessionImage struct {
	Key
	// Version is the session item's version.
	Version int64
	// Count is how many messages readers see; 0 unless Live.
	Count int
	// Incarnation tells a session from an earlier one under its id.
	Incarnation string
	// UpdatedAt is when the image's commit was made.
	UpdatedAt time.Time
	// Live is a session that readers see, as a commit leaves it; false for
	// a writer's mark of a new session, a staging and a tombstone.
	Live bool
	// Deleted is a delete's tombstone.
	Deleted bool
	// Rewound is the version of the session's last rewinding commit, and
	// RewoundTo the index it replaced messages from (see Turn.Rewind).
	Rewound   int64
	RewoundTo int
}

// SessionImageOf reads img, a stream record's image with its keys, as a
// session item. ok is false for any other item: messages, a sub-agent's
// conversation, claims, idempotency records, memory.
func SessionImageOf(img map[string]types.AttributeValue) (im SessionImage, ok bool) {
	pk, sk := getS(img, PartitionKey), getS(img, SortKey)
	rest, found := strings.CutPrefix(pk, "s#")
	if !found || sk != skMeta {
		return SessionImage{}, false
	}
	i := strings.LastIndexByte(rest, '#')
	if i < 1 {
		return SessionImage{}, false
	}
	im.Key = Key{Owner: rest[:i], ID: rest[i+1:]}
	if im.Key.validate() != nil {
		return SessionImage{}, false
	}
	it := item(img)
	im.Version = getN(it, attrVersion)
	im.Incarnation = getS(it, attrIncarnation)
	im.UpdatedAt = time.UnixMilli(getN(it, attrUpdated))
	im.Deleted = it[attrDeleted] != nil
	im.Live = !im.Deleted && it[attrCreated] != nil
	if im.Live {
		im.Count = int(getN(it, attrCount))
		im.Rewound, im.RewoundTo = getN(it, attrRewound), int(getN(it, attrRewoundTo))
	}
	return im, true
}

// CommittedMessages reads the messages from to to-1 of the session as the
// commit of im left them: a message that a later commit rewrote (a rewind,
// a regeneration, an edit) or that expired is left out, and so is every
// message when the session is now another incarnation or gone. It is for
// readers of the table's stream, which see a commit after it was made.
// The messages are returned by index.
func (s *Store) CommittedMessages(ctx context.Context, im SessionImage, from, to int) (map[int]agent.Message, error) {
	if err := im.Key.validate(); err != nil {
		return nil, err
	}
	if from < 0 || from > to || to > im.Count {
		return nil, invalidArgument("messages %d to %d of %d", from, to, im.Count)
	}
	if from == to {
		return nil, nil
	}
	pk := partitionKey(im.Key)
	meta, err := s.getItem(ctx, pk, skMeta)
	if err != nil {
		return nil, fmt.Errorf("ddbhistory: read %s: %w", im.ID, err)
	}
	if getS(meta, attrIncarnation) != im.Incarnation || sessionState(meta, s.cfg.Now()) != stateLive {
		return nil, nil
	}
	items, err := s.queryMessages(ctx, pk, mainKeys, from, to)
	if err != nil {
		return nil, fmt.Errorf("ddbhistory: read %s: %w", im.ID, err)
	}
	set := newMessageSet(mainKeys)
	set.add(items, s.cfg.Now())
	// A message is the commit's as a read beside the session item of the
	// image would see it (messageSet.current).
	commit := &Session{Key: im.Key, Version: im.Version, Count: im.Count, rewound: im.Rewound, rewoundTo: im.RewoundTo}
	out := make(map[int]agent.Message, to-from)
	for i := from; i < to; i++ {
		if !set.complete(i) || !set.current(i, commit) {
			continue
		}
		if m, err := set.found[i].decode(); err == nil {
			out[i] = m
		}
	}
	return out, nil
}

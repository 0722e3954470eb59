package ddbhistory

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/lambda-agent/lambda-agent/internal/agent"
)

// Turn is what a turn adds to a session.
type Turn struct {
	// Messages are appended to the session, in order.
	Messages []agent.Message
	// Window is the conversation manager's state after the turn.
	Window agent.WindowState
	// State is the agent state after the turn.
	State map[string]json.RawMessage
	// Hold, when set, is the idempotency key Begin held for the turn. The
	// commit turns it into the key's record, and stores Response for
	// replays of the turn, with where the turn's messages are.
	Hold *Hold
	// Response is what the turn answered; it is stored only with a Hold.
	Response json.RawMessage
	// Earlier counts the session's last messages that the turn committed
	// before, as a checkpoint: a replay of the turn returns them with
	// Messages.
	Earlier int
	// Pending is what the turn waits for when it paused for a person; nil
	// for a turn that ended. It replaces what the session had pending.
	Pending *agent.Pending
	// Resuming keeps the claim that ClaimPending took: the turn is the
	// checkpoint of a resume, whose claim lasts until its last commit.
	Resuming bool
	// Rewind, when set, makes the turn replace the session's messages
	// from index From on, in the same commit: regenerating or editing a
	// turn. Readers see the old messages or the turn's, never a mix; the
	// replaced messages are gone for good. Earlier must be 0.
	Rewind bool
	From   int
	// Staging, for a new session, is the staging (see Stage) whose
	// messages come before the turn's: the commit makes them visible with
	// it, and the messages it staged for a sub-agent (see StageAgent)
	// with the turn's AgentTurn of that agent, which starts where they
	// end. The staging must be as Staged read it.
	Staging *Staging
	// Agents are what the turn adds to its sub-agents' conversations,
	// which the commit stores with the rest of the turn, or not at all.
	Agents []AgentTurn
}

// First is the index the turn's first message takes in sess, which Commit
// is given: the next index, or where a rewind or a staging puts it.
// Messages that a checkpoint committed earlier come before it.
func (t *Turn) First(sess *Session) int {
	switch {
	case t.Rewind:
		return t.From
	case t.Staging != nil:
		return t.Staging.Count
	}
	return sess.Count
}

// ErrOutcomeUnknown is a write whose context ended after it was sent: a
// commit whose turn may or may not be stored, or a delete whose session may
// or may not be gone. Load with the turn's idempotency key, or read the
// session, to find out; a delete can be sent again.
var ErrOutcomeUnknown = errors.New("the write's outcome is unknown")

// Commit writes a turn to the session it was loaded as: the new messages, the
// idempotency record and the session item, on the condition that nobody
// committed since sess was loaded. Readers see all of the turn or none of it.
// A first commit also claims the session id, which is unique across owners.
// A turn with Rewind replaces the messages from Turn.From on instead of
// appending (see the package documentation).
//
// A turn that fits one transaction (100 items, 4 MB), as nearly every turn
// does, is one TransactWriteItems. A larger one is written in parts: a
// reservation on the session item, then the messages that do not fit the last
// transaction, each transaction guarded by the reservation, then the last,
// which writes the session item and so makes the messages visible. Until it
// lands they sit past the session's message count, where no reader looks; a
// commit that loses a race removes them, and the next commit overwrites what
// a crash leaves.
//
// It returns ErrConflict when another commit came first, ErrNotFound when a
// new session's id belongs to another owner, ErrThrottled when DynamoDB
// throttled every attempt, ErrTooLarge for an item larger than DynamoDB
// stores (agent state past 400 KB, say) before anything is written, and
// ErrOutcomeUnknown when ctx ended while the write that makes the
// turn visible was under way. On success it updates sess to the committed
// state: its conversation's window, state and pending interrupts, without
// its messages; what the caller set on it that the store does not keep
// (client tools, context, the sub-agents' loader) stays.
func (s *Store) Commit(ctx context.Context, sess *Session, turn Turn) error {
	if err := sess.validate(); err != nil {
		return err
	}
	if err := turn.Hold.validFor(sess); err != nil {
		return err
	}
	now := s.cfg.Now()
	if turn.Rewind && (turn.From < 0 || turn.From > sess.Count || turn.Earlier != 0 || turn.Resuming) {
		return invalidArgument("rewind to message %d of %d", turn.From, sess.Count)
	}
	if st := turn.Staging; st != nil && (sess.Version != 0 || st.Token == "" || st.Count < 0 || turn.Rewind || turn.Earlier != 0 || turn.Resuming) {
		return invalidArgument("staging %q is for a new session's first commit", st.Token)
	}
	count := turn.First(sess) + len(turn.Messages)
	if w := turn.Window; w.Removed < 0 || w.Removed > count {
		return invalidArgument("window starts at message %d of %d", w.Removed, count)
	}
	if turn.Earlier < 0 || turn.Earlier > sess.Count {
		return invalidArgument("%d earlier messages of %d", turn.Earlier, sess.Count)
	}
	if turn.Resuming && !sess.Resuming {
		return invalidArgument("session %s has no claim to keep", sess.ID)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("ddbhistory: commit %s: %w", sess.ID, err)
	}
	c, err := s.prepare(sess, turn, now)
	if err != nil {
		return fmt.Errorf("ddbhistory: commit %s: %w", sess.ID, err)
	}
	if c.fits() {
		err = c.final(ctx, append(c.messages, c.agentMessages...), c.firstOrVersion(now))
	} else {
		err = c.inParts(ctx, now)
	}
	if err != nil {
		return fmt.Errorf("ddbhistory: commit %s: %w", sess.ID, err)
	}
	c.committed(turn, now)
	if sess.Count < c.kept {
		c.dropDiscarded(ctx)
	}
	return nil
}

// dropDiscarded removes, best effort, the items of the messages a rewinding
// commit discarded past the session's new count: no reader looks at them,
// but a load's first query, which reads down from the session item, would
// read through them until later turns overwrite them. It deletes only while
// the session is as the commit left it, with no other commit under way
// (see reserve), so that it never removes what a later commit wrote.
func (c *commit) dropDiscarded(ctx context.Context) {
	if ctx.Err() != nil {
		return
	}
	sess := c.sess
	items, err := c.s.queryMessages(ctx, c.pk, mainKeys, sess.Count, c.kept, PartitionKey, SortKey)
	if err != nil || len(items) == 0 {
		return
	}
	guard := versionIs(sess.Version).and(&condition{
		expr:  "attribute_not_exists(#writer)",
		names: map[string]string{"#writer": attrWriter},
	})
	_ = c.s.deleteGuarded(ctx, c.pk, items, guard) // what it leaves, later commits overwrite
}

// write is one item of a transaction, with its size as DynamoDB counts it.
type write struct {
	types.TransactWriteItem
	size int
}

// commit is a turn's writes, ready to send.
type commit struct {
	s    *Store
	sess *Session
	pk   string
	// messages are the message items, in key order.
	messages []write
	// agentMessages are the message items of the turn's sub-agents,
	// which sit past their conversations' counts until the last
	// transaction, in which the tail writes their conversation items.
	agentMessages []write
	// tail goes in the last transaction, before the session item: the
	// idempotency record and response, the claim on the session id, and
	// the sub-agents' conversation items.
	tail []write
	// claimAt is the claim's index in tail, or -1 when there is none.
	claimAt int
	// meta is the session item. Its condition is chosen when it is sent,
	// as it depends on whether the turn fits one transaction.
	meta item

	// first is the index of the turn's first message, and kept how many
	// of the session's messages stay: the writes of messages below it
	// replace ones readers see, and so go in the last transaction.
	first, kept int
	// The session's attributes as the commit leaves them.
	incarnation, title string
	created            time.Time
	expires            int64
	claimedUntil       int64
	rewound            int64
	rewoundTo          int
	// staging is the staging whose reservation the commit completes.
	staging *Staging
	// agents names the sub-agents whose conversations the turn writes.
	agents []string
}

// prepare builds a turn's commit from the writes of each kind of item, and
// refuses, before anything is sent, an item that DynamoDB would.
func (s *Store) prepare(sess *Session, turn Turn, now time.Time) (*commit, error) {
	c := &commit{
		s: s, sess: sess, pk: partitionKey(sess.Key), claimAt: -1,
		incarnation: sess.incarnation, created: sess.CreatedAt, title: sess.Title,
		expires: s.expiry(now, s.cfg.TTL), claimedUntil: sess.claimedUntil,
		first: turn.First(sess), kept: sess.Count,
		rewound: sess.rewound, rewoundTo: sess.rewoundTo,
	}
	if turn.Rewind {
		c.rewound, c.rewoundTo = sess.Version+1, turn.From
	}
	var err error
	// Messages record the version that wrote them once the session has
	// been rewound: only then can a read see one that is not current.
	var stamp int64
	if c.rewound > 0 {
		stamp = sess.Version + 1
	}
	if c.messages, err = s.messageWrites(c.pk, mainKeys, c.first, turn.Messages, stamp, c.expires, now); err != nil {
		return nil, err
	}
	if sess.Version == 0 {
		// A new incarnation tells this session from an earlier one under its
		// key, so that an idempotency record of that one replays nothing here.
		c.incarnation = newIncarnation()
		c.created, c.title = now, titleOf(turn.Messages)
		if turn.Staging != nil {
			c.title, c.staging = turn.Staging.Title, turn.Staging
		}
	} else if c.first == 0 {
		c.title = titleOf(turn.Messages) // every message replaced
	}
	if turn.Hold != nil {
		c.tail = append(c.tail, s.recordWrites(sess, turn, c.incarnation, now)...)
	}
	if s.claimDue(sess, now) {
		c.claimedUntil = s.expiry(now, 2*s.cfg.TTL)
		c.claimAt = len(c.tail)
		c.tail = append(c.tail, s.claimWrite(sess, c.claimedUntil, now))
	}
	agentMessages, agentMetas, err := c.agentWrites(turn.Agents, now)
	if err != nil {
		return nil, err
	}
	c.agentMessages, c.tail = agentMessages, append(c.tail, agentMetas...)
	if c.meta, err = c.sessionItem(turn, now); err != nil {
		return nil, err
	}
	if err := c.checkItems(); err != nil {
		return nil, err
	}
	return c, nil
}

// messageWrites returns the writes of msgs, stored as messages first, first+1
// and on: one write per item, so a message too large for one takes several.
// They are unconditional: a key past the session's count holds at most what
// a failed commit left, which is there to be overwritten.
func (s *Store) messageWrites(pk string, ks keyspace, first int, msgs []agent.Message, version, expires int64, now time.Time) ([]write, error) {
	var ws []write
	for i, m := range msgs {
		its, err := messageItems(pk, ks, first+i, m, version, expires, now)
		if err != nil {
			return nil, err
		}
		for _, it := range its {
			ws = append(ws, write{s.put(it, nil), itemSize(it)})
		}
	}
	return ws, nil
}

// claimDue reports whether a commit at now writes the claim on sess's id: it
// does for a new session, and renews the claim when less than a TTL is left.
// The claim lives twice as long as the session item, so it always outlives
// the session, while a turn usually writes no more than its messages and the
// session item.
func (s *Store) claimDue(sess *Session, now time.Time) bool {
	return sess.Version == 0 || (sess.claimedUntil > 0 && sess.claimedUntil-now.Unix() < int64(s.cfg.TTL.Seconds()))
}

// claimWrite returns the write of the claim on sess's id, expiring at until
// (Unix seconds), on the condition that the id is free or sess's owner's
// already: a first commit under an id that another owner holds fails.
func (s *Store) claimWrite(sess *Session, until int64, now time.Time) write {
	claim := item{
		PartitionKey: str(claimKey(sess.ID)),
		SortKey:      str(skClaim),
		attrOwner:    str(sess.Owner),
		TTLAttribute: num(until),
	}
	return write{s.put(claim, claimable(sess.Owner, now)), itemSize(claim)}
}

// sessionItem returns the session item as the commit leaves it. It is an item
// rather than a write: its condition depends on how the turn is sent.
func (c *commit) sessionItem(turn Turn, now time.Time) (item, error) {
	window, err := json.Marshal(turn.Window)
	if err != nil {
		return nil, fmt.Errorf("encode window: %w", err)
	}
	state, err := json.Marshal(turn.State)
	if err != nil {
		return nil, fmt.Errorf("encode state: %w", err)
	}
	meta := item{
		PartitionKey:    str(c.pk),
		SortKey:         str(skMeta),
		attrOwner:       str(c.sess.Owner),
		attrSessionID:   str(c.sess.ID),
		attrVersion:     num(c.sess.Version + 1),
		attrCount:       num(c.first + len(turn.Messages)),
		attrWindow:      str(string(window)),
		attrState:       str(string(state)),
		attrIncarnation: str(c.incarnation),
		attrCreated:     num(c.created.UnixMilli()),
		attrUpdated:     num(now.UnixMilli()),
		attrClaimed:     num(c.claimedUntil),
		TTLAttribute:    num(c.expires),
	}
	if c.title != "" {
		meta[attrTitle] = str(c.title)
	}
	if c.rewound > 0 {
		meta[attrRewound], meta[attrRewoundTo] = num(c.rewound), num(c.rewoundTo)
	}
	if turn.Pending != nil {
		pending, err := json.Marshal(turn.Pending)
		if err != nil {
			return nil, fmt.Errorf("encode pending interrupts: %w", err)
		}
		meta[attrPending] = bin(compress(pending))
	}
	if turn.Resuming {
		meta[attrResuming] = num(c.sess.resumingUntil)
	}
	return meta, nil
}

// checkItems refuses an item larger than DynamoDB stores. Every item must fit
// on its own, however the turn is split into transactions.
func (c *commit) checkItems() error {
	for i, n := range sizes(c.messages, c.agentMessages, c.tail) {
		if n > MaxItemBytes {
			return &TooLargeError{What: fmt.Sprintf("item %d", i), Size: n, Limit: MaxItemBytes}
		}
	}
	if n := itemSize(c.meta); n > MaxItemBytes {
		return &TooLargeError{What: "the session item", Size: n, Limit: MaxItemBytes}
	}
	return nil
}

// committed updates the session to the state the commit wrote.
func (c *commit) committed(turn Turn, now time.Time) {
	sess := c.sess
	sess.Version++
	sess.claimedUntil = c.claimedUntil
	sess.Count = c.first + len(turn.Messages)
	sess.rewound, sess.rewoundTo = c.rewound, c.rewoundTo
	// What the caller brought to the turn (client tools, context, the
	// sub-agents' loader) stays; the messages are not loaded.
	conv := &sess.Conversation
	conv.Messages, conv.Window, conv.State, conv.Pending = nil, turn.Window, turn.State, turn.Pending
	sess.Resuming = turn.Resuming
	sess.CreatedAt, sess.UpdatedAt = time.UnixMilli(c.created.UnixMilli()), time.UnixMilli(now.UnixMilli())
	sess.ExpiresAt = time.Time{}
	if c.expires > 0 {
		sess.ExpiresAt = time.Unix(c.expires, 0)
	}
	sess.incarnation, sess.Title = c.incarnation, c.title
	sess.Replay = nil
}

// fits reports whether the whole turn fits one transaction.
func (c *commit) fits() bool {
	return checkTransaction(append(sizes(c.messages, c.agentMessages, c.tail), itemSize(c.meta))) == nil
}

// firstOrVersion is the session item's condition for a commit in one
// transaction: no session yet, or the version loaded.
func (c *commit) firstOrVersion(now time.Time) *condition {
	if c.staging != nil {
		return stagedAs(c.staging, c.agents)
	}
	if c.sess.Version == 0 {
		return noSession(now)
	}
	return versionIs(c.sess.Version)
}

// final sends the transaction that makes the turn visible: msgs, the tail,
// and the session item on condition cond.
func (c *commit) final(ctx context.Context, msgs []write, cond *condition) error {
	items := make([]types.TransactWriteItem, 0, len(msgs)+len(c.tail)+1)
	for _, w := range msgs {
		items = append(items, w.TransactWriteItem)
	}
	claimAt := -1
	for i, w := range c.tail {
		if i == c.claimAt {
			claimAt = len(items)
		}
		items = append(items, w.TransactWriteItem)
	}
	items = append(items, c.s.put(c.meta, cond))
	err := c.s.transact(ctx, items)
	switch {
	case err == nil:
		return nil
	case claimAt >= 0 && failedAt(err, claimAt):
		// Another owner holds this id. To the caller it does not exist.
		return ErrNotFound
	case ctx.Err() != nil:
		// The transaction may have reached DynamoDB before ctx ended.
		return fmt.Errorf("%w: %w", ErrOutcomeUnknown, err)
	}
	return c.s.classify(err)
}

// inParts writes a turn too large for one transaction: see Commit.
func (c *commit) inParts(ctx context.Context, now time.Time) error {
	// The last transaction takes the tail, the session item, the writes that
	// replace messages readers see, and as many of the last messages as
	// fit; the rest, and the sub-agents' messages, go first, in
	// transactions that each check the reservation.
	r := c.replacing()
	var tooLarge *TooLargeError
	if err := checkTransaction(append(sizes(c.messages[:r], c.tail), itemSize(c.meta))); errors.As(err, &tooLarge) {
		tooLarge.What = "the messages that replace the rewound ones, with the session item,"
		return tooLarge
	}
	split := len(c.messages)
	for split > r && checkTransaction(append(sizes(c.messages[:r], c.messages[split-1:], c.tail), itemSize(c.meta))) == nil {
		split--
	}
	token := newIncarnation()
	guard, err := c.reserve(ctx, token, now)
	if err != nil {
		return err
	}
	var written []write
	for _, chunk := range chunks(append(c.messages[r:split:split], c.agentMessages...)) {
		items := []types.TransactWriteItem{c.s.check(c.pk, skMeta, guard)}
		for _, w := range chunk {
			items = append(items, w.TransactWriteItem)
		}
		if err := c.s.transact(ctx, items); err != nil {
			c.dropLeftovers(ctx, written, token)
			return c.s.classify(err)
		}
		written = append(written, chunk...)
	}
	err = c.final(ctx, append(c.messages[:r:r], c.messages[split:]...), guard)
	if err != nil && !errors.Is(err, ErrOutcomeUnknown) {
		c.dropLeftovers(ctx, written, token)
	}
	return err
}

// reserve marks the session item as being written by the commit with token,
// on the commit's usual condition, and returns the condition that holds for
// as long as nobody else has committed or reserved it since. For a new
// session the reservation is a session item with no creation time, which
// readers take for no session.
func (c *commit) reserve(ctx context.Context, token string, now time.Time) (*condition, error) {
	if c.staging != nil {
		return c.firstOrVersion(now), nil // reserved by Stage already
	}
	writer := &condition{expr: "#writer = :writer", names: map[string]string{"#writer": attrWriter}, values: item{":writer": str(token)}}
	var (
		guard *condition
		err   error
	)
	if c.sess.Version == 0 {
		cond := noSession(now)
		_, err = c.s.client.PutItem(ctx, &dynamodb.PutItemInput{
			TableName: aws.String(c.s.cfg.Table),
			Item: item{
				PartitionKey: str(c.pk), SortKey: str(skMeta),
				attrVersion: num(0), attrWriter: str(token), TTLAttribute: num(c.expires),
			},
			ConditionExpression:       aws.String(cond.expr),
			ExpressionAttributeNames:  cond.names,
			ExpressionAttributeValues: cond.values,
		}, c.s.retries)
		guard = writer.and(&condition{
			expr:  "attribute_not_exists(#created) AND attribute_not_exists(#deleted)",
			names: map[string]string{"#created": attrCreated, "#deleted": attrDeleted},
		})
	} else {
		cond := versionIs(c.sess.Version)
		_, err = c.s.client.UpdateItem(ctx, &dynamodb.UpdateItemInput{
			TableName:                 aws.String(c.s.cfg.Table),
			Key:                       item{PartitionKey: str(c.pk), SortKey: str(skMeta)},
			UpdateExpression:          aws.String("SET #writer = :writer"),
			ConditionExpression:       aws.String(cond.expr),
			ExpressionAttributeNames:  map[string]string{"#version": attrVersion, "#writer": attrWriter},
			ExpressionAttributeValues: item{":version": num(c.sess.Version), ":writer": str(token)},
		}, c.s.retries)
		guard = cond.and(writer)
	}
	if err != nil {
		return nil, c.s.classify(err)
	}
	return guard, nil
}

// dropLeftovers removes the message items a failed commit wrote, where they
// are still past the session's count, and only while no other commit writes
// the session: it must never delete what another commit wrote under the same
// keys. It does its best within ctx; what it leaves, the next commit
// overwrites. It leaves the sub-agents' messages, whose conversations'
// counts it does not read: they too sit where no reader looks, until a
// later commit of their conversation overwrites them.
func (c *commit) dropLeftovers(ctx context.Context, written []write, token string) {
	if len(written) == 0 || ctx.Err() != nil {
		return
	}
	meta, err := c.s.getItem(ctx, c.pk, skMeta)
	if err != nil || meta == nil || meta[attrDeleted] != nil {
		return // a delete removes them anyway
	}
	count := int(getN(meta, attrCount))
	guard := versionIs(getN(meta, attrVersion)).and(&condition{
		expr:   "attribute_not_exists(#writer) OR #writer = :writer",
		names:  map[string]string{"#writer": attrWriter},
		values: item{":writer": str(token)},
	})
	var keys []item
	for _, w := range written {
		it := w.Put.Item
		if i, _, ok := parseMessageKey(getS(it, SortKey)); ok && i >= count {
			keys = append(keys, item{PartitionKey: it[PartitionKey], SortKey: it[SortKey]})
		}
	}
	_ = c.s.deleteGuarded(ctx, c.pk, keys, guard) // best effort: see above
}

// transact sends one transaction. The same token on the SDK's retries makes
// a retry of a transaction that did succeed succeed again, rather than fail
// its conditions.
func (s *Store) transact(ctx context.Context, items []types.TransactWriteItem) error {
	_, err := s.client.TransactWriteItems(ctx, &dynamodb.TransactWriteItemsInput{
		TransactItems:      items,
		ClientRequestToken: aws.String(newIncarnation() + newIncarnation()),
	}, s.retries)
	return err
}

// replacing counts the leading message writes that replace messages readers
// see: those of a rewinding turn below the session's old count.
func (c *commit) replacing() int {
	n := 0
	for _, w := range c.messages {
		if indexOf(w) >= c.kept {
			break
		}
		n++
	}
	return n
}

// chunks groups message writes into transactions that leave room for one
// condition check.
func chunks(ws []write) [][]write {
	var out [][]write
	for len(ws) > 0 {
		n, size := 0, conditionCheckBytes
		for n < len(ws) && n < MaxTransactionItems-1 && size+ws[n].size <= MaxTransactionBytes {
			size += ws[n].size
			n++
		}
		n = max(n, 1) // an item fits a transaction on its own: see checkItems
		out = append(out, ws[:n])
		ws = ws[n:]
	}
	return out
}

// conditionCheckBytes is what a condition check on a session item counts
// towards a transaction's size, generously.
const conditionCheckBytes = 4 << 10

// sizes lists the sizes of the writes in groups, in order.
func sizes(groups ...[]write) []int {
	var out []int
	for _, g := range groups {
		for _, w := range g {
			out = append(out, w.size)
		}
	}
	return out
}

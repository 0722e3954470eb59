package ddbhistory

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/lambda-agent/lambda-agent/internal/agent"
)

// A staged session is a new session written over several requests, as a
// long import is: Stage writes its messages part by part, under a
// reservation of its session item (see Commit), where no reader sees them;
// the Commit whose Turn.Staging names it writes the last messages and the
// session item, and so makes the whole session visible at once. A staging
// that is never committed stays invisible: a later session under the id
// replaces its reservation and overwrites its messages, and their TTL
// removes them.

// Staging is a staged session, as Staged reads it.
type Staging struct {
	// Token names the staging; Stage chose it for the first part.
	Token string
	// Count is how many messages are staged, and Last the last of them,
	// which the next part must follow; nil for none.
	Count int
	Last  *agent.Message
	// Header is what the first part set aside for the commit, as given.
	Header json.RawMessage
	// Title is the title the session will have, from its first message.
	Title string
	// Agents are the messages staged for the sub-agents' conversations
	// (see StageAgent), by name; nil when none are.
	Agents map[string]StagedAgent
}

// StagedAgent is what a staging holds of a sub-agent's conversation: how
// many messages, and the last of them.
type StagedAgent struct {
	Count int
	Last  *agent.Message
}

// Stage writes msgs as messages first, first+1 and on of the staged session
// token under key. The first part (first 0) starts the staging, with
// header set aside for the commit: it fails with ErrConflict when key names
// a session, and with ErrIDTaken when another owner holds the id; it
// replaces an earlier staging under key, which can write no more. Each
// later part must start where the staging ends. A part sent again after it
// was written succeeds without writing; a part for a staging that another
// has replaced is ErrNotFound (or ErrConflict, when the replacement lands
// while the part is written), and one that does not start at its end is
// ErrConflict. It returns the staging as the part leaves it.
func (s *Store) Stage(ctx context.Context, key Key, token string, first int, msgs []agent.Message, header json.RawMessage) (*Staging, error) {
	if err := key.validate(); err != nil {
		return nil, err
	}
	if token == "" || first < 0 || len(msgs) == 0 {
		return nil, invalidArgument("staging %q: messages %d to %d", token, first, first+len(msgs))
	}
	now := s.cfg.Now()
	pk := partitionKey(key)
	expires := s.expiry(now, s.cfg.TTL)
	if first == 0 {
		reservation := item{
			PartitionKey: str(pk), SortKey: str(skMeta),
			attrVersion: num(0), attrWriter: str(token), attrStaged: num(0),
			attrHeader: bin(compress(header)), attrTitle: str(titleOf(msgs)),
			TTLAttribute: num(expires),
		}
		// The header rides on the reservation, which the staging's
		// transactions update, until the commit replaces it.
		if n := itemSize(reservation) + conditionCheckBytes; n > MaxItemBytes {
			return nil, fmt.Errorf("ddbhistory: stage %s: %w", key.ID, &TooLargeError{What: "the staging's header", Size: n, Limit: MaxItemBytes})
		}
		// Another owner's id would fail only at the commit, after every
		// part: refuse it now.
		if err := s.checkClaim(ctx, key); errors.Is(err, ErrIDTaken) || !errors.Is(err, ErrNotFound) {
			return nil, fmt.Errorf("ddbhistory: stage %s: %w", key.ID, err)
		}
		cond := noSession(now)
		_, err := s.client.PutItem(ctx, &dynamodb.PutItemInput{
			TableName:                 aws.String(s.cfg.Table),
			Item:                      reservation,
			ConditionExpression:       aws.String(cond.expr),
			ExpressionAttributeNames:  cond.names,
			ExpressionAttributeValues: cond.values,
		}, s.retries)
		if err != nil {
			return nil, fmt.Errorf("ddbhistory: stage %s: %w", key.ID, s.classify(err))
		}
	}
	// A new session records no versions (see messageSet.current).
	ws, err := s.messageWrites(pk, mainKeys, first, msgs, 0, expires, now)
	if err != nil {
		return nil, fmt.Errorf("ddbhistory: stage %s: %w", key.ID, err)
	}
	for _, w := range ws {
		if w.size > MaxItemBytes {
			return nil, fmt.Errorf("ddbhistory: stage %s: %w", key.ID, &TooLargeError{What: "a message item", Size: w.size, Limit: MaxItemBytes})
		}
	}
	// A part sent again goes on from where the staging is.
	at := first
	st := &Staging{Token: token, Header: header, Title: titleOf(msgs)}
	if first > 0 {
		if st, err = s.Staged(ctx, key, token); err != nil {
			return nil, err
		}
		switch {
		case st.Count >= first+len(msgs):
			return st, nil // sent before, and written then
		case st.Count < first:
			return nil, fmt.Errorf("ddbhistory: stage %s: %w: %d messages are staged, and a part starts at %d", key.ID, ErrConflict, st.Count, first)
		}
		at = st.Count
		for len(ws) > 0 && indexOf(ws[0]) < at {
			ws = ws[1:]
		}
	}
	if err := s.stageWrites(ctx, pk, token, attrStaged, at, ws); err != nil {
		return nil, fmt.Errorf("ddbhistory: stage %s: %w", key.ID, err)
	}
	st.Count, st.Last = first+len(msgs), &msgs[len(msgs)-1]
	return st, nil
}

// StageAgent writes msgs as messages first, first+1 and on of the
// conversation of the sub-agent name in the staged session token under
// key, where no reader sees them: the Commit whose Turn.Staging names the
// staging makes them visible, with an AgentTurn of name that starts
// where they end. A part must start where the sub-agent's staged messages
// end (StagedAgent.Count, 0 for none), or it is ErrConflict, as it is
// under a staging that another has replaced; a staging that is not under
// way is ErrNotFound.
func (s *Store) StageAgent(ctx context.Context, key Key, token, name string, first int, msgs []agent.Message) error {
	if err := key.validate(); err != nil {
		return err
	}
	if err := validAgentName(name); err != nil {
		return err
	}
	if token == "" || first < 0 || len(msgs) == 0 {
		return invalidArgument("staging %q: agent %s's messages %d to %d", token, name, first, first+len(msgs))
	}
	now := s.cfg.Now()
	pk := partitionKey(key)
	ws, err := s.messageWrites(pk, agentKeys(name), first, msgs, 0, s.expiry(now, s.cfg.TTL), now)
	if err == nil {
		for _, w := range ws {
			if w.size > MaxItemBytes {
				err = &TooLargeError{What: "a message item", Size: w.size, Limit: MaxItemBytes}
				break
			}
		}
	}
	if err == nil {
		err = s.stageWrites(ctx, pk, token, stagedAgentAttr(name), first, ws)
	}
	if errors.Is(err, ErrConflict) {
		// A conflict of the first transaction: tell a staging that is not
		// under way from a part that does not start where the agent's
		// staged messages end.
		if _, serr := s.Staged(ctx, key, token); errors.Is(serr, ErrNotFound) {
			err = ErrNotFound
		}
	}
	if err != nil {
		return fmt.Errorf("ddbhistory: stage agent %s of %s: %w", name, key.ID, err)
	}
	return nil
}

// stagedAgentAttr is the attribute of a staging's reservation that counts
// the messages staged for the sub-agent name.
func stagedAgentAttr(name string) string { return stagedAgentPrefix + name }

const stagedAgentPrefix = "staged:"

// stageWrites sends ws, the writes of a staging's messages from index at
// on, counted by the reservation's attribute count. Each transaction moves
// the count on, under the condition that it is where the transaction
// starts: a part's transactions land in order, and a part sent twice
// lands once.
func (s *Store) stageWrites(ctx context.Context, pk, token, count string, at int, ws []write) error {
	done := 0 // the writes sent so far
	for _, chunk := range chunks(ws) {
		done += len(chunk)
		// A message whose items span two transactions counts once its
		// last item is written.
		next := indexOf(chunk[len(chunk)-1])
		if done == len(ws) || indexOf(ws[done]) != next {
			next++
		}
		cond := stagedAt(token, 0)
		cond.names["#staged"] = count
		if at == 0 && count != attrStaged {
			cond.expr = strings.Replace(cond.expr, "#staged = :staged", "attribute_not_exists(#staged)", 1)
			delete(cond.values, ":staged")
		} else {
			cond.values[":staged"] = num(at)
		}
		cond.values[":next"] = num(next)
		items := []types.TransactWriteItem{{Update: &types.Update{
			TableName:                 aws.String(s.cfg.Table),
			Key:                       item{PartitionKey: str(pk), SortKey: str(skMeta)},
			UpdateExpression:          aws.String("SET #staged = :next"),
			ConditionExpression:       aws.String(cond.expr),
			ExpressionAttributeNames:  cond.names,
			ExpressionAttributeValues: cond.values,
		}}}
		for _, w := range chunk {
			items = append(items, w.TransactWriteItem)
		}
		if err := s.transact(ctx, items); err != nil {
			return s.classify(err)
		}
		at = next
	}
	return nil
}

// indexOf is the index of the message a write puts, in its keyspace.
func indexOf(w write) int {
	sk := getS(w.Put.Item, SortKey)
	if strings.HasPrefix(sk, skAgent) {
		// a#<name>#m#...: agent names hold no '#'.
		sk = sk[strings.Index(sk[len(skAgent):], "#")+len(skAgent)+1:]
	}
	i, _, _ := parseMessageKey(sk)
	return i
}

// stagedAt holds for the reservation of staging token with count messages
// staged.
func stagedAt(token string, count int) *condition {
	return &condition{
		expr:   "#writer = :writer AND #staged = :staged AND attribute_not_exists(#created)",
		names:  map[string]string{"#writer": attrWriter, "#staged": attrStaged, "#created": attrCreated},
		values: item{":writer": str(token), ":staged": num(count)},
	}
}

// stagedAs holds for the reservation of st as it was read: its messages,
// and its sub-agents' (none staged for the agents of names that st does
// not list).
func stagedAs(st *Staging, names []string) *condition {
	c := stagedAt(st.Token, st.Count)
	for i, name := range names {
		ref := fmt.Sprintf("#sa%d", i)
		c.names[ref] = stagedAgentAttr(name)
		if a, ok := st.Agents[name]; ok {
			c.expr += fmt.Sprintf(" AND %s = :sa%d", ref, i)
			c.values[fmt.Sprintf(":sa%d", i)] = num(a.Count)
		} else {
			c.expr += fmt.Sprintf(" AND attribute_not_exists(%s)", ref)
		}
	}
	return c
}

// Staged reads the staging token under key. It returns ErrNotFound when
// there is none: it was never started, another has replaced it, it has
// been committed, or it expired.
func (s *Store) Staged(ctx context.Context, key Key, token string) (*Staging, error) {
	if err := key.validate(); err != nil {
		return nil, err
	}
	pk := partitionKey(key)
	meta, err := s.getItem(ctx, pk, skMeta)
	switch {
	case err != nil:
		return nil, fmt.Errorf("ddbhistory: staged %s: %w", key.ID, err)
	case meta == nil || expired(meta, s.cfg.Now()) || meta[attrCreated] != nil || meta[attrStaged] == nil ||
		token == "" || getS(meta, attrWriter) != token:
		return nil, fmt.Errorf("ddbhistory: staged %s: %w", key.ID, ErrNotFound)
	}
	st := &Staging{Token: token, Count: int(getN(meta, attrStaged)), Title: getS(meta, attrTitle)}
	if st.Header, err = decompress(getB(meta, attrHeader)); err != nil {
		return nil, fmt.Errorf("ddbhistory: staged %s: decode header: %w", key.ID, err)
	}
	if st.Last, err = s.stagedLast(ctx, pk, mainKeys, st.Count); err != nil {
		return nil, fmt.Errorf("ddbhistory: staged %s: %w", key.ID, err)
	}
	for attr := range meta {
		name, ok := strings.CutPrefix(attr, stagedAgentPrefix)
		if !ok {
			continue
		}
		a := StagedAgent{Count: int(getN(meta, attr))}
		if a.Last, err = s.stagedLast(ctx, pk, agentKeys(name), a.Count); err != nil {
			return nil, fmt.Errorf("ddbhistory: staged %s: agent %s: %w", key.ID, name, err)
		}
		if st.Agents == nil {
			st.Agents = map[string]StagedAgent{}
		}
		st.Agents[name] = a
	}
	return st, nil
}

// stagedLast reads the last of the count messages staged in keyspace ks;
// nil for none.
func (s *Store) stagedLast(ctx context.Context, pk string, ks keyspace, count int) (*agent.Message, error) {
	if count == 0 {
		return nil, nil
	}
	items, err := s.queryMessages(ctx, pk, ks, count-1, count)
	if err != nil {
		return nil, err
	}
	msgs := newMessageSet(ks)
	msgs.add(items, s.cfg.Now())
	if !msgs.complete(count - 1) {
		return nil, fmt.Errorf("message %d is missing", count-1)
	}
	last, err := msgs.found[count-1].decode()
	if err != nil {
		return nil, fmt.Errorf("message %d: %w", count-1, err)
	}
	return &last, nil
}

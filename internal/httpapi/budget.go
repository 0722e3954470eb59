package httpapi

import (
	"encoding/json"
	"net/http"

	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/lambdahttp"
	"github.com/lambda-agent/lambda-agent/internal/turn"
)

// Reference stands, in an answer or a page, for a message too large for a
// buffered response: API Gateway's invocations return at most 6 MB, counted
// on the response event, where a message's JSON is escaped again. The
// stream function's URL, which streams, serves the message whole with GET
// /sessions/{sessionId}?cursor={cursor}&limit=1, and a sub-agent's with
// &agent={agent} too.
type Reference struct {
	// Agent names the sub-agent whose conversation holds the message;
	// absent for the main agent's.
	Agent string `json:"agent,omitempty"`
	// Index is the message's index in the session, or in the sub-agent's
	// conversation.
	Index int `json:"index"`
	// Bytes is the size of the message's JSON.
	Bytes int `json:"bytes"`
	// Cursor starts a transcript page at the message.
	Cursor string `json:"cursor"`
}

// referenced is what an answer carries in place of a message too large for
// it: the message's role, and where to read it.
type referenced struct {
	Role      agent.Role `json:"role"`
	Reference Reference  `json:"reference"`
}

// budget returns how many bytes, as lambdahttp.BodySize counts them, the
// body of an answer to r may take: lambdahttp.MaxBodyBytes for a buffered
// invocation, 0 (no limit) for a stream or a plain HTTP server.
func budget(r *http.Request) int {
	if lambdahttp.Buffered(r) {
		return lambdahttp.MaxBodyBytes
	}
	return 0
}

// messageList is the messages of an answer or a page, stored from index
// first on, each encoded, with the bytes it takes in a response.
type messageList struct {
	// agent is the sub-agent whose conversation holds the messages; ""
	// for the main agent's.
	agent string
	first int
	msgs  []agent.Message
	raws  []json.RawMessage
	sizes []int
	refs  []bool // which messages are references
}

func newMessageList(msgs []agent.Message, first int) (*messageList, error) {
	l := &messageList{first: first, msgs: msgs, raws: make([]json.RawMessage, len(msgs)), sizes: make([]int, len(msgs)), refs: make([]bool, len(msgs))}
	for i, m := range msgs {
		raw, err := json.Marshal(m)
		if err != nil {
			return nil, err
		}
		l.raws[i], l.sizes[i] = raw, lambdahttp.BodySize(raw)
	}
	return l, nil
}

// reference replaces message i by a reference to it.
func (l *messageList) reference(i int) {
	at := l.first + i
	raw, _ := json.Marshal(referenced{Role: l.msgs[i].Role, Reference: Reference{Agent: l.agent, Index: at, Bytes: len(l.raws[i]), Cursor: turn.CursorAt(at)}}) // always encodes
	l.raws[i], l.sizes[i], l.refs[i] = raw, lambdahttp.BodySize(raw), true
}

// size is what the first n messages add to a response: themselves and the
// commas between them.
func (l *messageList) size(n int) int {
	total := max(n-1, 0)
	for _, s := range l.sizes[:n] {
		total += s
	}
	return total
}

// fitAnswer encodes the body that set makes of msgs, stored from index
// first on, which an answer carries all of: when the body would take more
// than limit (0: no limit), its largest messages are replaced by
// references until it fits, or none is left to replace.
func fitAnswer(limit int, msgs []agent.Message, first int, set func([]json.RawMessage) any) ([]byte, error) {
	l, err := newMessageList(msgs, first)
	if err != nil {
		return nil, err
	}
	if limit > 0 {
		rest, err := restSize(set)
		if err != nil {
			return nil, err
		}
		for rest+l.size(len(l.raws)) > limit {
			largest := -1
			for i, s := range l.sizes {
				if !l.refs[i] && (largest < 0 || s > l.sizes[largest]) {
					largest = i
				}
			}
			if largest < 0 {
				break // the rest of the answer is too large; see its caller
			}
			l.reference(largest)
		}
	}
	return json.Marshal(set(l.raws))
}

// fitPage returns how many of the messages, from the first, a page holds
// within limit (0: no limit) beside the rest of its body, which takes rest
// bytes: at least one, which becomes a reference when it fits alone
// nowhere.
func (l *messageList) fitPage(limit, rest int) int {
	if limit == 0 || len(l.raws) == 0 {
		return len(l.raws)
	}
	n := 1
	for total := rest + l.sizes[0]; n < len(l.raws) && total+1+l.sizes[n] <= limit; n++ {
		total += 1 + l.sizes[n]
	}
	if rest+l.sizes[0] > limit {
		l.reference(0)
	}
	return n
}

// restSize is what a body that set makes takes in a response with no
// messages: all but what size counts.
func restSize(set func([]json.RawMessage) any) (int, error) {
	empty, err := json.Marshal(set([]json.RawMessage{}))
	if err != nil {
		return 0, err
	}
	return lambdahttp.BodySize(empty), nil
}

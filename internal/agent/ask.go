package agent

import (
	"context"
	"encoding/json"
	"errors"
	"time"
)

// Asker is a tool whose run may stop to ask the person a question: its
// Run returns Ask's error, the turn pauses on the use as it does on
// ask_user's (an interrupt of KindQuestion, named AskedName), and the
// person's answer, when the turn resumes (Answer), goes to Answered,
// whose result is the use's. Answered may ask again. A declined or
// expired question gets an error result, as ask_user's does, and the tool
// is not called.
//
// A tool that waits on another party, such as a remote agent that needs
// more from the person, is one: the question is the other party's, and
// the answer goes back to it, in whichever invocation resumes the turn.
// What it needs to go on must be in the agent's state (ToolCall.State),
// which the session keeps.
type Asker interface {
	Tool
	Answered(ctx context.Context, call *ToolCall, answer string) ([]ToolResultContent, error)
}

// AskedName names the interrupts that an Asker's questions raise.
const AskedName = "asked"

// askError is an Asker's question.
type askError struct{ question string }

func (e *askError) Error() string { return "the tool asks the person: " + e.question }

// Ask returns the error with which an Asker's Run or Answered stops to
// ask the person question.
func Ask(question string) error { return &askError{question: question} }

// askerOf returns the Asker that t is, or wraps to require approval.
func askerOf(t Tool) (Asker, bool) {
	switch t := t.(type) {
	case Asker:
		return t, true
	case approvalTool:
		return askerOf(t.Tool)
	}
	return nil, false
}

// askedInterrupt is the interrupt of u's question, when err is one that
// tool, an Asker, asks.
func (t *turn) askedInterrupt(tool Tool, u *ToolUseBlock, err error) (*Interrupt, bool) {
	var ask *askError
	if _, ok := askerOf(tool); !ok || !errors.As(err, &ask) {
		return nil, false
	}
	payload, _ := json.Marshal(map[string]string{"question": ask.question})
	return &Interrupt{
		ID: u.ToolUseID, Kind: KindQuestion, Name: AskedName, Tool: u.Name, Input: inputOf(u),
		Reason: ask.question, Payload: payload,
		// Whole seconds, rounded up, as interruptFor's.
		ExpiresAt: t.a.cfg.Now().Add(t.a.cfg.InterruptTTL + time.Second - 1).UTC().Truncate(time.Second),
	}, true
}

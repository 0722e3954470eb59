package agent

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
)

// ErrUnknownTool is a direct call of a tool the agent does not have.
var ErrUnknownTool = errors.New("the agent has no tool by that name")

// ToolInputError is a direct call whose input does not match the tool's
// input schema. Nothing ran.
type ToolInputError struct {
	Tool     string
	Problems []string
}

func (e *ToolInputError) Error() string {
	return fmt.Sprintf("the input does not match the schema of tool %s: %s", e.Tool, strings.Join(e.Problems, "; "))
}

// DirectCall is a call of one tool by the person, without the model: a
// button such as "refresh my orders".
type DirectCall struct {
	Name string
	// Input is the tool's input, a JSON object; empty means {}.
	Input json.RawMessage
	// Record adds the call to the conversation, so that the model knows
	// of it on the next turn. Without it no message is added; what the
	// tool changes in the agent state is kept either way.
	Record bool
}

// DirectResult is what a direct call did.
type DirectResult struct {
	Result
	// Use is the call, as the model would have made it, and Output the
	// tool's result, an error result when the tool failed.
	Use    *ToolUseBlock
	Output *ToolResultBlock
}

// Texts of a recorded direct call.
const (
	directCallText   = "[I called the tool %s myself, not through you, with the input %s; the call and its result follow.]"
	directResultText = "[The tool %s was called directly; its result is above.]"
	directFailedText = "[The tool %s was called directly, and failed; its error is above.]"
)

// CallTool runs one of the agent's tools as the model would, with its
// schema check, tool hooks, timeout and error results, but with no model
// call. Only Config.DirectTools may be called, and never ask_user, which
// asks the person. The caller is the person, so a tool that needs approval
// runs without it. Any other name is ErrUnknownTool, and an input the
// tool's schema refuses a *ToolInputError, before anything runs; when the
// reserve before the deadline begins during the run, the call fails as a
// turn would.
//
// With Record, the Result's messages record the call as a valid history:
// the person's note of the call, the assistant's tool use, the user's tool
// result and the assistant's short note of it. CallTool leaves conv
// unchanged.
func (a *Agent) CallTool(ctx context.Context, conv *Conversation, call DirectCall) (*DirectResult, error) {
	box := a.toolbox(ctx)
	r, ok := box.tools[call.Name]
	if !ok || !slices.Contains(a.cfg.DirectTools, call.Name) {
		return nil, fmt.Errorf("%w: %q; the tools you may call are: %s", ErrUnknownTool, call.Name, a.callable(box))
	}
	if _, asks := r.tool.(askUser); asks {
		// ask_user asks the person, who is the caller here: no one would
		// answer.
		return nil, fmt.Errorf("%w: %q asks the person, and cannot be called by the person; the tools you may call are: %s", ErrUnknownTool, call.Name, a.callable(box))
	}
	input := call.Input
	if len(input) == 0 {
		input = json.RawMessage("{}")
	}
	if problems := r.schema.validate(input); problems != nil {
		return nil, &ToolInputError{Tool: call.Name, Problems: problems}
	}
	work, cancel := a.workContext(ctx)
	defer cancel()
	t := a.newTurn(conv)
	t.box = box
	use := &ToolUseBlock{ToolUseID: directID(), Name: call.Name, Input: input}
	var run ToolRun
	out, held := t.runTool(work, use, true, &run) // approved: nothing of this agent's interrupts
	if held != nil {
		// A sub-agent's turn paused: nobody is there to answer it.
		out = t.a.admit(TextResult(use.ToolUseID, ToolError, fmt.Sprintf("The agent %s needs a person's answer, which a direct call cannot wait for.", call.Name)))
	}
	if err := work.Err(); err != nil {
		// The reserve began: as a turn would, this one fails and stores
		// nothing, rather than a result the deadline, not the tool, made.
		return nil, t.fail(ctx, work, err)
	}
	t.metrics.ToolCalls = 1
	if run.Name != "" {
		t.metrics.Tools = []ToolRun{run}
	}
	if !call.Record {
		res := t.finish("", "")
		// What the session waits for, such as the results of tools that
		// ran before an interrupt expired, stays for the next turn.
		res.Pending = conv.Pending
		return &DirectResult{Result: *res, Use: use, Output: out}, nil
	}
	note := directResultText
	if out.Status == ToolError {
		note = directFailedText
	}
	// As a turn begins: after a note when the history ends with a user
	// message, and answering the tool uses an expired interrupt left open.
	t.begin(ctx, []ContentBlock{Text(fmt.Sprintf(directCallText, call.Name, Clip(string(input), maxNotedInput)))})
	t.add(ctx, Message{Role: RoleAssistant, Content: []ContentBlock{{ToolUse: use}}})
	t.add(ctx, Message{Role: RoleUser, Content: []ContentBlock{{ToolResult: out}}})
	t.add(ctx, AssistantText(fmt.Sprintf(note, call.Name)))
	return &DirectResult{Result: *t.finish("", ""), Use: use, Output: out}, nil
}

// maxNotedInput bounds the input the note of a recorded call quotes: the
// tool use holds it whole.
const maxNotedInput = 1 << 10

// callable lists the tools of box that CallTool runs, in the order of
// Config.DirectTools, or says there are none.
func (a *Agent) callable(box *toolbox) string {
	var names []string
	for _, name := range a.cfg.DirectTools {
		if r, ok := box.tools[name]; ok {
			if _, asks := r.tool.(askUser); !asks {
				names = append(names, name)
			}
		}
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// directID returns a tool use id for a direct call, in the form Bedrock
// takes.
func directID() string {
	b := make([]byte, 12)
	_, _ = rand.Read(b) // crypto/rand does not fail
	return "direct_" + hex.EncodeToString(b)
}

package offline

import (
	"encoding/json"
	"regexp"
	"slices"
	"strings"

	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/memory"
	"github.com/lambda-agent/lambda-agent/internal/testkit/conversetest"
)

// Long-term memory, offline: the extraction that internal/memory asks of
// a model after each commit, and answers from what a turn recalls. Both
// read simple statements only, so that the local run shows memory at work
// across sessions without Bedrock.

// updateMemory is the tool an extraction request forces.
const updateMemory = memory.UpdateTool

// maxMemoryOps bounds the operations of one answer, as update_memory's
// schema does.
const maxMemoryOps = 20

// contextHeader starts the text block in which the agent gives a turn its
// context (agent.Conversation.Context, and what providers such as memory's
// add).
const contextHeader = agent.ContextHeader

// memoryOp is an operation of update_memory's input.
type memoryOp struct {
	Action  string `json:"action"`
	ID      string `json:"id,omitempty"`
	Kind    string `json:"kind,omitempty"`
	Text    string `json:"text,omitempty"`
	Message *int   `json:"message,omitempty"`
}

// extraction answers a request that forces update_memory, and reports
// whether req is one: a forced tool of that name whose input takes
// operations.
func extraction(req *conversetest.Request, name string) (conversetest.Reply, bool) {
	schema, ok := inputSchema(req, name)
	props, _ := schema["properties"].(map[string]any)
	if name != updateMemory || !ok || props["operations"] == nil {
		return conversetest.Reply{}, false
	}
	var data string
	if len(req.Messages) > 0 {
		data = req.Messages[len(req.Messages)-1].Text()
	}
	ops := extract(data, memoryKinds(props))
	return conversetest.ToolUse(newID(req), updateMemory, map[string]any{"operations": ops}), true
}

// memoryKinds are the kinds update_memory's schema offers, in its order.
func memoryKinds(props map[string]any) []string {
	ops, _ := props["operations"].(map[string]any)
	items, _ := ops["items"].(map[string]any)
	fields, _ := items["properties"].(map[string]any)
	kind, _ := fields["kind"].(map[string]any)
	enum, _ := kind["enum"].([]any)
	var out []string
	for _, k := range enum {
		if s, ok := k.(string); ok && s != "" {
			out = append(out, s)
		}
	}
	return out
}

// extract is what the offline model learns from an extraction's data, the
// JSON {"memory":[{id,kind,text}],"conversation":[{index,role,text}]}: the
// operations that keep memory in line with the person's statements of
// simple forms, with only the given kinds.
//
//   - "My favourite colour is teal." adds a fact, "The person's favourite
//     colour is teal.", or updates the record that holds another value of
//     the same subject; the same value again changes nothing.
//   - "I like tea." ("love", "prefer") adds a preference, "The person likes
//     tea.", unless memory holds it.
//   - "Forget my favourite colour." and "Forget that I like tea." delete
//     what memory holds of them.
//
// Questions, the assistant's words, and subjects that name secrets
// (passwords, keys, card or account numbers) teach nothing. Data that is
// not of that shape teaches nothing either; nothing makes it panic.
func extract(data string, kinds []string) []memoryOp {
	var in memory.ExtractionData
	if json.Unmarshal([]byte(data), &in) != nil {
		return []memoryOp{}
	}
	var l learning
	for _, line := range in.Conversation {
		if line.Role != "user" {
			continue
		}
		for _, c := range clauses(line.Text) {
			l.clause(c, line.Index)
		}
	}
	ops := []memoryOp{}
	add := func(op memoryOp) {
		if len(ops) < maxMemoryOps {
			ops = append(ops, op)
		}
	}
	for _, key := range l.order {
		w := l.wants[key]
		var held []string // ids of the records about the same thing
		same := false
		for _, r := range in.Memory {
			if r.ID == "" || memoryKey(r.Text) != key {
				continue
			}
			if strings.EqualFold(r.Text, w.text) {
				same = true
			} else {
				held = append(held, r.ID)
			}
		}
		switch {
		case w.text == "": // forgotten last
			for _, id := range held {
				add(memoryOp{Action: "delete", ID: id})
			}
		case same: // memory holds it already
		case len(held) > 0:
			add(memoryOp{Action: "update", ID: held[0], Text: w.text, Message: &w.message})
		default:
			if kind, ok := pickKind(kinds, w.kind); ok {
				add(memoryOp{Action: "add", Kind: kind, Text: w.text, Message: &w.message})
			}
		}
	}
	return ops
}

// learning is what one extraction's statements want memory to hold, by
// subject, in the order the subjects came up: the last statement of each
// wins.
type learning struct {
	order []string
	wants map[string]*want
}

// want is what memory should hold of a subject: text, of kind; or nothing,
// when text is empty, the subject forgotten.
type want struct {
	kind, text string
	message    int
}

func (l *learning) set(key string, w want) {
	if l.wants == nil {
		l.wants = map[string]*want{}
	}
	if _, ok := l.wants[key]; !ok {
		l.order = append(l.order, key)
	}
	l.wants[key] = &w
}

// The statements the offline model learns from, one clause each. A fact's
// subject is one to four words.
var (
	leadIn   = `(?:(?:please\s+)?(?:remember|note)(?:\s+that)?[,:]?\s+|(?:and|also|so|actually|btw|oh|well)[,:]?\s+)*`
	factRe   = regexp.MustCompile(`(?i)^` + leadIn + `my\s+((?:[\p{L}\p{N}'’-]+\s+){0,3}?[\p{L}\p{N}'’-]+)\s+(is|are)\s+(.+)$`)
	likeRe   = regexp.MustCompile(`(?i)^` + leadIn + `i\s+(?:really\s+|also\s+|do\s+)?(like|love|prefer)\s+(.+)$`)
	forgetRe = regexp.MustCompile(`(?i)^(?:please\s+)?forget\s+(?:about\s+)?(?:that\s+)?(?:my\s+(.+)|i\s+(?:really\s+|also\s+|do\s+)?(like|love|prefer)\s+(.+))$`)
	// subjectRe reads what a forget names of a fact: "favourite colour",
	// or "favourite colour is teal".
	subjectRe = regexp.MustCompile(`(?i)^((?:[\p{L}\p{N}'’-]+\s+){0,3}?[\p{L}\p{N}'’-]+)(?:\s+(?:is|are)\s+.*)?$`)
	// heldFactRe and heldLikeRe read the records this model writes.
	heldFactRe = regexp.MustCompile(`(?i)^the person's\s+(.+?)\s+(?:is|are)\s+.+$`)
	heldLikeRe = regexp.MustCompile(`(?i)^the person\s+(?:likes|loves|prefers)\s+.+$`)
	// sentenceEnd splits a message into sentences; clauseStart splits a
	// sentence before each statement of its own, "..., and my name is ...".
	sentenceEnd = regexp.MustCompile(`[.!?;\n]+`)
	clauseStart = regexp.MustCompile(`(?i)(?:,\s*(?:(?:and|but|also)\s+)?|\s+(?:and|but)\s+)(?:i|my)\b`)
)

// secretWords are words of a subject that memory must not keep.
var secretWords = []string{"password", "passwords", "passcode", "passphrase", "pin", "secret", "secrets", "token", "key", "keys", "card", "account", "iban", "ssn"}

// maxValueBytes bounds what a statement says of its subject.
const maxValueBytes = 200

// clause learns from one clause, of the message at index.
func (l *learning) clause(c string, index int) {
	if m := forgetRe.FindStringSubmatch(c); m != nil {
		switch {
		case m[1] != "":
			if s := subjectRe.FindStringSubmatch(strings.TrimSpace(m[1])); s != nil {
				l.set("fact:"+subject(s[1]), want{message: index})
			}
		default:
			if v, ok := value(m[3]); ok {
				l.set(memoryKey(likeText(m[2], v)), want{message: index})
			}
		}
		return
	}
	if m := factRe.FindStringSubmatch(c); m != nil {
		s := subject(m[1])
		v, ok := value(m[3])
		if !ok || slices.ContainsFunc(strings.Fields(s), func(w string) bool { return slices.Contains(secretWords, w) }) {
			return
		}
		l.set("fact:"+s, want{kind: "fact", text: "The person's " + s + " " + strings.ToLower(m[2]) + " " + v + ".", message: index})
		return
	}
	if m := likeRe.FindStringSubmatch(c); m != nil {
		if v, ok := value(m[2]); ok {
			text := likeText(m[1], v)
			l.set(memoryKey(text), want{kind: "preference", text: text, message: index})
		}
	}
}

// clauses splits a message into the clauses of its statements, leaving
// out questions.
func clauses(text string) []string {
	var out []string
	for rest := text; rest != ""; {
		loc := sentenceEnd.FindStringIndex(rest)
		s, end := rest, ""
		if loc != nil {
			s, end, rest = rest[:loc[0]], rest[loc[0]:loc[1]], rest[loc[1]:]
		} else {
			rest = ""
		}
		if strings.Contains(end, "?") {
			continue
		}
		for {
			m := clauseStart.FindStringIndex(s)
			if m == nil {
				break
			}
			word := m[1] - 1 // where "i" or "my" starts
			if strings.EqualFold(s[word-1:m[1]], "my") {
				word--
			}
			out = append(out, strings.TrimSpace(s[:m[0]]))
			s = s[word:]
		}
		out = append(out, strings.TrimSpace(s))
	}
	return slices.DeleteFunc(out, func(c string) bool { return c == "" })
}

// subject is a fact's subject as memory keys it: lower case, single
// spaces.
func subject(s string) string { return strings.Join(strings.Fields(strings.ToLower(s)), " ") }

// value cleans what a statement says, and refuses what is empty or too
// long to be a simple fact.
func value(s string) (string, bool) {
	s = strings.Trim(strings.TrimSpace(s), `.,;:!"'“”‘’`)
	s = strings.TrimSpace(s)
	return s, s != "" && len(s) <= maxValueBytes
}

func likeText(verb, v string) string { return "The person " + strings.ToLower(verb) + "s " + v + "." }

// memoryKey is what a record is about, as this model wrote it: a fact's
// subject, or a preference's whole text. A record of another form is
// about nothing this model can tell.
func memoryKey(text string) string {
	if m := heldFactRe.FindStringSubmatch(text); m != nil {
		return "fact:" + subject(m[1])
	}
	if heldLikeRe.MatchString(text) {
		return "like:" + strings.ToLower(strings.Join(strings.Fields(text), " "))
	}
	return ""
}

// pickKind is kind if the schema offers it, or else the schema's first.
func pickKind(kinds []string, kind string) (string, bool) {
	if slices.Contains(kinds, kind) {
		return kind, true
	}
	if len(kinds) > 0 {
		return kinds[0], true
	}
	return "", false
}

// recalled is a record as a turn's context gives it (memory.Provider).
type recalled struct {
	Kind string `json:"kind"`
	Text string `json:"text"`
}

// personText splits a user message into what the person wrote and the
// context blocks the application added.
func personText(m conversetest.Message) (text string, context []string) {
	var parts []string
	for _, b := range m.Content {
		switch {
		case b.Text == "":
		case strings.HasPrefix(b.Text, contextHeader):
			context = append(context, b.Text)
		default:
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n"), context
}

// recalledRecords reads the records that memory recalled into a turn's
// context blocks; none when it recalled nothing, or the block is not one
// it reads.
func recalledRecords(context []string) []recalled {
	var out []recalled
	tag := "\n- " + memory.RecallDescription + ": "
	for _, c := range context {
		_, rest, ok := strings.Cut(c, tag)
		if !ok {
			continue
		}
		var rs []recalled
		if json.NewDecoder(strings.NewReader(rest)).Decode(&rs) == nil {
			out = append(out, rs...)
		}
	}
	return out
}

var likesRe = regexp.MustCompile(`(?i)^what do i (?:like|love|prefer)\??$`)

// fromMemory answers a question from the records recalled into the turn:
// "what is my X" from a fact of X, unless this conversation told the
// remember tool X, which the recall tool then reads; "what do I like"
// from the preferences.
func fromMemory(req *conversetest.Request, text string, records []recalled) (string, bool) {
	if len(records) == 0 {
		return "", false
	}
	if m := recallRe.FindStringSubmatch(text); m != nil {
		s := subject(m[1])
		if slices.Contains(req.ToolNames(), "recall") && toldHere(req, key(m[1])) {
			return "", false
		}
		for _, r := range records {
			if memoryKey(r.Text) == "fact:"+s {
				return "From memory: " + sentence(r.Text), true
			}
		}
		return "", false
	}
	if likesRe.MatchString(text) {
		var likes []string
		for _, r := range records {
			if strings.HasPrefix(memoryKey(r.Text), "like:") {
				likes = append(likes, sentence(r.Text))
			}
		}
		if len(likes) > 0 {
			return "From memory: " + strings.Join(likes, " "), true
		}
	}
	return "", false
}

// toldHere reports whether the conversation called remember with key.
func toldHere(req *conversetest.Request, key string) bool {
	for _, m := range req.Messages {
		for _, b := range m.Content {
			if u := b.ToolUse; u != nil && u.Name == "remember" {
				var in struct {
					Key string `json:"key"`
				}
				if json.Unmarshal(u.Input, &in) == nil && in.Key == key {
					return true
				}
			}
		}
	}
	return false
}

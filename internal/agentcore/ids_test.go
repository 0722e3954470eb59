package agentcore_test

import (
	"os"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/lambda-agent/lambda-agent/internal/agentcore"
)

// The API reference's patterns and lengths for actorId and sessionId.
var (
	actorIDPattern   = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9-_/]*$`)
	sessionIDPattern = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9-_]*$`)
)

const (
	maxActorID   = 255
	maxSessionID = 100
)

func checkActor(t *testing.T, owner, got string) {
	t.Helper()
	if n := len(got); n < 1 || n > maxActorID || !actorIDPattern.MatchString(got) {
		t.Errorf("ActorID(%q) = %q: not an actorId", owner, got)
	}
}

func checkSession(t *testing.T, session, got string) {
	t.Helper()
	if n := len(got); n < 1 || n > maxSessionID || !sessionIDPattern.MatchString(got) {
		t.Errorf("SessionID(%q) = %q: not a sessionId", session, got)
	}
}

func TestIDs(t *testing.T) {
	tests := []struct {
		name           string
		owner, session string
		wantActor      string // "" to check only the shape
		wantSession    string
	}{
		// SHA-256("") is e3b0c442…; its base32 is checked against the
		// standard library's in TestEncodingMatchesDefinition.
		{name: "empty", owner: "", session: ""},
		{name: "IAM role", owner: "iam:arn:aws:iam::1:role/x", session: "chat-1"},
		{name: "colons and dots in the session", owner: "user", session: "a.b:c-d_e"},
		{name: "non-ASCII owner", owner: "utilisateur:élodie/日本", session: "Z9"},
		{name: "1 KB owner, 128 session", owner: strings.Repeat("ü", 512), session: strings.Repeat("s", 128)},
		{name: "invalid UTF-8", owner: "\xff\xfe", session: "\x00"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, s := agentcore.ActorID(tt.owner), agentcore.SessionID(tt.session)
			checkActor(t, tt.owner, a)
			checkSession(t, tt.session, s)
			if len(a) != agentcore.IDLength || len(s) != agentcore.IDLength ||
				!strings.HasPrefix(a, agentcore.ActorPrefix) || !strings.HasPrefix(s, agentcore.SessionPrefix) {
				t.Errorf("ids %q, %q: want %d characters with their prefixes", a, s, agentcore.IDLength)
			}
			if a != agentcore.ActorID(tt.owner) || s != agentcore.SessionID(tt.session) {
				t.Error("not deterministic")
			}
		})
	}
}

// TestKnownValues pins the encoding: changing it would orphan every event
// and record already in AgentCore.
func TestKnownValues(t *testing.T) {
	tests := []struct{ got, want string }{
		// SHA-256("") = e3b0c442 98fc1c14 9afbf4c8 996fb924 27ae41e4 649b934c a495991b 7852b855
		{agentcore.ActorID(""), "o-4oymiquy7qobjgx36tejs35zeqt24qpemsnzgtfeswmrw6csxbkq"},
		{agentcore.SessionID(""), "s-4oymiquy7qobjgx36tejs35zeqt24qpemsnzgtfeswmrw6csxbkq"},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("got %q, want %q", tt.got, tt.want)
		}
	}
}

func TestDistinct(t *testing.T) {
	seen := map[string]string{}
	for _, owner := range []string{"a", "A", "a ", "iam:arn:aws:iam::1:role/x", "iam:arn:aws:iam::1:role/y", "iam:arn:aws:iam::2:role/x"} {
		id := agentcore.ActorID(owner)
		if prev, ok := seen[id]; ok {
			t.Errorf("ActorID(%q) = ActorID(%q) = %q", owner, prev, id)
		}
		seen[id] = owner
	}
	if agentcore.ActorID("x") == agentcore.SessionID("x") {
		t.Error("an actorId equals a sessionId")
	}
}

func FuzzIDs(f *testing.F) {
	f.Add("iam:arn:aws:iam::123456789012:role/agent", "chat-2025-06-01.a:1")
	f.Add("", "")
	f.Add(strings.Repeat("é", 512), strings.Repeat("9", 128))
	f.Fuzz(func(t *testing.T, owner, session string) {
		a, s := agentcore.ActorID(owner), agentcore.SessionID(session)
		checkActor(t, owner, a)
		checkSession(t, session, s)
		if len(a) != agentcore.IDLength || len(s) != agentcore.IDLength || !utf8.ValidString(a) {
			t.Errorf("ids %q, %q: want %d characters", a, s, agentcore.IDLength)
		}
	})
}

// TestDoc checks the worked example of docs/memory.md's AgentCore Memory
// section: its ids are the ones this package computes for its owner and
// session, and its namespace path the one recall uses.
func TestDoc(t *testing.T) {
	b, err := os.ReadFile("../../docs/memory.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	const owner, session = "iam:arn:aws:iam::123456789012:role/agent", "chat-2025-06-01.a:1"
	for _, want := range []string{
		"OWNER='" + owner + "'",
		"SESSION='" + session + "'",
		"--actor-id " + agentcore.ActorID(owner),
		"--session-id " + agentcore.SessionID(session),
		"actorId `" + agentcore.ActorID(owner) + "`",
		"sessionId `" + agentcore.SessionID(session) + "`",
		"`" + (&agentcore.Config{Namespace: agentcore.DefaultNamespace}).NamespacePath(owner) + "`",
	} {
		if !strings.Contains(doc, want) {
			t.Errorf("docs/memory.md lacks %q", want)
		}
	}
}

package agentcore

import (
	"crypto/sha256"
	"encoding/base32"
	"strings"
)

// Prefixes of the encoded ids, so that an actorId and a sessionId are
// told apart at a glance and never equal.
const (
	ActorPrefix   = "o-"
	SessionPrefix = "s-"
)

// IDLength is the length of every id this package returns: a prefix of 2
// and 52 base32 characters for the 256 bits of a SHA-256.
const IDLength = 54

var encoding = base32.StdEncoding.WithPadding(base32.NoPadding)

// ActorID returns the AgentCore actorId that stands for owner: "o-" and
// the lower-case base32 (no padding) of the SHA-256 of owner's bytes. Any
// string, the empty one included, gives a valid actorId; validating the
// owner is the caller's business.
func ActorID(owner string) string {
	return encode(ActorPrefix, owner)
}

// SessionID returns the AgentCore sessionId that stands for one of our
// session ids: "s-" and the lower-case base32 (no padding) of the SHA-256
// of its bytes. It depends on the session id alone; AgentCore keys events
// by actorId and sessionId together, so two owners' sessions of the same
// id stay apart.
func SessionID(session string) string {
	return encode(SessionPrefix, session)
}

func encode(prefix, s string) string {
	sum := sha256.Sum256([]byte(s))
	return prefix + strings.ToLower(encoding.EncodeToString(sum[:]))
}

package turn

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/ddbhistory"
)

// ErrSessionExists is an import under a session id that is in use: the
// caller's session, or another owner's. An import never overwrites one.
var ErrSessionExists = errors.New("the session id is in use")

// Import creates a session from a whole history, which the caller has
// checked (see agent.ValidateHistory): the session named, or a new one.
type Import struct {
	Request
	Messages []agent.Message
	Window   agent.WindowState
	State    map[string]json.RawMessage
	Pending  *agent.Pending
	// Staging, for the last page of an import in pages, holds the pages
	// before it (see ddbhistory.Stage); Messages are the last page's.
	Staging *ddbhistory.Staging
}

// ImportAnswer is the answer to an import, as POST /sessions/import
// returns it and the store keeps it for replays.
type ImportAnswer struct {
	SessionID    string `json:"session_id"`
	MessageCount int    `json:"message_count"`
}

// Import commits im as a new session, with the idempotency of Chat: a
// retry with the key answers the first import again. The session is
// written in one commit, in parts if it is large, and readers see all of
// it or none. An id in use, whoever's, is ErrSessionExists.
func (s *Service) Import(ctx context.Context, im Import) (*Outcome[ImportAnswer], error) {
	out, err := run(ctx, s, im.Request, job[ImportAnswer]{
		run: func(_, _ context.Context, sess *ddbhistory.Session) (*done[ImportAnswer], error) {
			if sess.Version != 0 {
				return nil, ErrSessionExists
			}
			count := len(im.Messages)
			if im.Staging != nil {
				count += im.Staging.Count
			}
			return &done[ImportAnswer]{
				Result:  &agent.Result{Messages: im.Messages, Window: im.Window, State: im.State, Pending: im.Pending},
				Answer:  ImportAnswer{SessionID: sess.ID, MessageCount: count},
				Staging: im.Staging,
			}, nil
		},
		stored: whole[ImportAnswer],
		replay: storedAnswer[ImportAnswer],
	})
	var commit *CommitError
	switch {
	case errors.Is(err, ddbhistory.ErrIDTaken),
		errors.As(err, &commit) && (errors.Is(err, ddbhistory.ErrConflict) || errors.Is(err, ddbhistory.ErrNotFound)):
		// Another owner's id, or a session created since the load: to the
		// caller, an id in use either way.
		return nil, fmt.Errorf("%w: %w", ErrSessionExists, err)
	}
	return out, err
}

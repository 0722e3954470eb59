package a2a

import (
	"context"
	"errors"
	"fmt"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/turn"
	"golang.org/x/sync/errgroup"
)

// Bounds on a page of ListTasks.
const (
	defaultListSize = 20
	maxListSize     = 100
	// listReads bounds the reads of sessions' last tasks that run at
	// once.
	listReads = 8
)

// ListTasks lists tasks: with a contextId, the tasks of that session,
// oldest first; without one, the last task of each of the caller's
// sessions, newest session first. Either pages with pageToken.
func (h *Handler) ListTasks(ctx context.Context, req *a2a.ListTasksRequest) (*a2a.ListTasksResponse, error) {
	c := call(ctx)
	size := req.PageSize
	switch {
	case size == 0:
		size = defaultListSize
	case size < 0 || size > maxListSize:
		return nil, h.fail(c, invalid("pageSize %d is not between 1 and %d", size, maxListSize))
	case req.StatusTimestampAfter != nil:
		return nil, h.fail(c, invalid("statusTimestampAfter is not supported: a task keeps no time of its own, only its session's"))
	}
	var (
		tasks []*a2a.Task
		next  string
		err   error
	)
	if req.ContextID != "" {
		c.SessionID = req.ContextID
		tasks, next, err = h.contextTasks(ctx, c.Owner, req.ContextID, req.PageToken, size)
	} else {
		tasks, next, err = h.lastTasks(ctx, c.Owner, req.PageToken, size)
	}
	if err != nil {
		return nil, h.fail(c, err)
	}
	out := &a2a.ListTasksResponse{Tasks: []*a2a.Task{}, PageSize: size, NextPageToken: next}
	for _, t := range tasks {
		if req.Status != "" && t.Status.State != req.Status {
			continue
		}
		if !req.IncludeArtifacts {
			t.Artifacts = nil
		}
		if req.HistoryLength == nil {
			t.History = nil
		}
		out.Tasks = append(out.Tasks, t)
	}
	out.TotalSize = len(out.Tasks)
	return out, nil
}

// contextTasks reads the tasks of session id from the turn that starts at
// cursor ("" for the first), size at most, and the cursor of the next.
func (h *Handler) contextTasks(ctx context.Context, owner, id, cursor string, size int) ([]*a2a.Task, string, error) {
	var (
		msgs  []agent.Message
		first = -1
		page  *turn.Page
		err   error
	)
	// Read until the page holds size turns and the start of the next, or
	// the session's end.
	for reads := 0; ; reads++ {
		page, err = h.cfg.Service.Transcript(ctx, owner, id, cursor, taskPage)
		if err != nil {
			return nil, "", err
		}
		if first < 0 {
			first = page.First
		}
		msgs = append(msgs, page.Messages...)
		if turns(msgs) > size || page.NextCursor == "" || reads == maxTaskPages*maxListSize/taskPage {
			break
		}
		cursor = page.NextCursor
	}
	var tasks []*a2a.Task
	now := h.cfg.Now()
	start := 0
	for start < len(msgs) && len(tasks) < size {
		s := turnStart(msgs, start)
		if s < 0 {
			break
		}
		end := nextTurn(msgs, s)
		last := end < 0 && page.NextCursor == ""
		if end < 0 && !last {
			break // the turn goes on past what was read
		}
		if end < 0 {
			end = len(msgs)
		}
		v := &turnView{ref: taskRef{session: id, first: first + s}, msgs: msgs[s:end], last: last}
		v.ref.message = v.msgs[v.start()].ID
		if last {
			v.pending, v.resuming, v.updated = page.Pending, page.Resuming, page.UpdatedAt
		}
		tasks = append(tasks, v.task(nil, now))
		start = end
	}
	next := ""
	if first+start < page.Count && len(tasks) > 0 {
		next = turn.CursorAt(first + start)
	}
	return tasks, next, nil
}

// turnStart is the index in msgs, from i, of the first message of the
// next turn that starts there: its start, or the note before it; -1 for
// none.
func turnStart(msgs []agent.Message, i int) int {
	for ; i < len(msgs); i++ {
		if agent.StartsTurn(msgs[i]) || (agent.Unanswered(msgs[i]) && i+1 < len(msgs) && agent.StartsTurn(msgs[i+1])) {
			return i
		}
	}
	return -1
}

// turns counts the turns that start in msgs.
func turns(msgs []agent.Message) int {
	n := 0
	for _, m := range msgs {
		if agent.StartsTurn(m) {
			n++
		}
	}
	return n
}

// lastTasks reads the last task of each of size of owner's sessions, from
// cursor.
func (h *Handler) lastTasks(ctx context.Context, owner, cursor string, size int) ([]*a2a.Task, string, error) {
	list, err := h.cfg.Service.List(ctx, owner, cursor, size)
	if err != nil {
		return nil, "", err
	}
	tasks := make([]*a2a.Task, len(list.Sessions))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(listReads)
	now := h.cfg.Now()
	for i, s := range list.Sessions {
		g.Go(func() error {
			page, err := h.cfg.Service.Tail(gctx, owner, s.SessionID, taskPage)
			switch {
			case errors.Is(err, turn.ErrNotFound):
				return nil // deleted since it was listed
			case err != nil:
				return fmt.Errorf("session %s: %w", s.SessionID, err)
			}
			start := -1
			for j := len(page.Messages) - 1; j >= 0 && start < 0; j-- {
				if agent.StartsTurn(page.Messages[j]) {
					start = j
				}
			}
			if start < 0 {
				return nil // no turn, or one longer than a tail
			}
			if start > 0 && agent.Unanswered(page.Messages[start-1]) {
				start--
			}
			v := &turnView{
				ref:  taskRef{session: s.SessionID, first: page.First + start, message: page.Messages[start].ID},
				msgs: page.Messages[start:], last: true, pending: page.Pending, resuming: page.Resuming, updated: page.UpdatedAt,
			}
			if s := v.start(); s >= 0 {
				v.ref.message = v.msgs[s].ID
			}
			tasks[i] = v.task(nil, now)
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, "", err
	}
	out := tasks[:0]
	for _, t := range tasks {
		if t != nil {
			out = append(out, t)
		}
	}
	return out, list.NextCursor, nil
}

package httpapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"runtime/debug"
	"time"

	"github.com/lambda-agent/lambda-agent/internal/agui"
	"github.com/lambda-agent/lambda-agent/internal/turn"
)

// aguiRun serves POST /agui: an AG-UI run (a RunAgentInput) answered with
// AG-UI events as Server-Sent Events (internal/agui). The caller, the
// limits on the body, the idempotency of the run and the refusals before
// the stream are those of POST /chat/stream: a refusal before the run
// keeps its status and JSON body; once the stream has begun, a failure is
// a RUN_ERROR event with the error's code.
func (h *Handler) aguiRun(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	rec := &record{}
	status := 0
	var stream *agui.Stream
	fail := func(e *Error) {
		rec.outcome = e.Code
		if rec.err == nil {
			rec.err = e.err
		}
		if stream != nil && stream.Fail(e.Code, e.Message) {
			rec.errorStatus = e.Status()
			return
		}
		status = writeError(w, e, rec)
	}
	defer func() {
		if v := recover(); v != nil {
			rec.err = fmt.Errorf("panic: %v\n%s", v, debug.Stack())
			fail(internalError())
		}
		if stream != nil && stream.Started() && status == 0 {
			status = http.StatusOK
		}
		h.log(r, status, rec, time.Since(start))
	}()
	owner, e := h.owner(r)
	if e != nil {
		fail(e)
		return
	}
	raw, e := body(r, h.bodyLimit())
	if e != nil {
		fail(e)
		return
	}
	var in agui.RunAgentInput
	if err := json.Unmarshal(raw, &in); err != nil {
		fail(badRequest("invalid_json", "the body is not a RunAgentInput: %v", err))
		return
	}
	rec.sessionID = in.ThreadID
	run, err := agui.Prepare(r.Context(), h.cfg.Service, owner, &in)
	if err != nil {
		fail(errorFor(err))
		return
	}
	// The run's id is its idempotency key, in AG-UI's own namespace.
	if len(in.RunID) > maxIdempotencyKey-len("agui:") {
		fail(badRequest("invalid_request", "runId is %d characters; at most %d", len(in.RunID), maxIdempotencyKey-len("agui:")))
		return
	}
	if run.Chat.Content != nil {
		if e := checkInput(run.Chat.Content, h.cfg.MaxMessageBytes); e != nil {
			fail(e)
			return
		}
	}
	stream = agui.NewStream(w, run, in.ThreadID, in.RunID, h.cfg.ModelID)
	if run.Replay {
		// Every message is stored already: the run answers with what the
		// server holds, and nothing runs.
		rec.outcome, rec.replayed = "ok", true
		stream.Replay()
		return
	}
	c := run.Chat
	c.IdempotencyKey, c.Fingerprint = "agui:"+in.RunID, turn.Fingerprint(RouteAGUI, raw)
	c.Sink = stream
	out, err := h.cfg.Service.Chat(r.Context(), c)
	if err != nil {
		rec.noteCost(err)
		fail(errorFor(err))
		return
	}
	rec.outcome, rec.result, rec.replayed = "ok", out.Result, out.Replayed
	stream.Finish(out, out.First)
}

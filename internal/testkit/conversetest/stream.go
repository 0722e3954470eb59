package conversetest

import (
	"encoding/json"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/aws/aws-sdk-go-v2/aws/protocol/eventstream"
)

// DefaultChunkBytes is how many bytes of text or tool input one
// contentBlockDelta event carries unless a reply says otherwise, so that a
// streamed answer arrives in several pieces as a real model's does.
const DefaultChunkBytes = 8

// StreamError is an exception a streamed reply ends with, after a number of
// its events have been sent.
type StreamError struct {
	// After is how many events are sent before the exception; 0 sends it
	// right after the HTTP 200.
	After int
	// Code is the exception's name as the SDK knows it, such as
	// "ThrottlingException" or "ModelStreamErrorException".
	Code    string
	Message string
}

// CodeModelStreamError is the exception Bedrock sends when the model fails
// in the middle of a streamed answer.
const CodeModelStreamError = "ModelStreamErrorException"

// WithChunking returns r streamed in pieces of at most n bytes of text or
// tool input (cut at rune boundaries), each piece after a pause of delay.
// It has no effect on Converse.
func (r Reply) WithChunking(n int, delay time.Duration) Reply {
	r.ChunkBytes, r.ChunkDelay = n, delay
	return r
}

// WithStreamError returns r streamed up to its first after events and then
// cut short by the exception code. Converse answers it with r's content as
// usual.
func (r Reply) WithStreamError(after int, code, message string) Reply {
	r.StreamErr = &StreamError{After: after, Code: code, Message: message}
	return r
}

// serveConverseStream answers ConverseStream: the same checks and script as
// Converse, then HTTP 200 and the reply as a vnd.amazon.eventstream of
// messageStart, contentBlockStart/Delta/Stop per block, messageStop and
// metadata events (with the guardrail's trace, when there is one), each
// flushed on its own.
func (s *Server) serveConverseStream(w http.ResponseWriter, r *http.Request, modelID string, start time.Time) {
	req, reply, ok := s.exchange(w, r, "ConverseStream", modelID)
	if !ok {
		return
	}
	// The cache sees the request now, as Bedrock's does before the model
	// answers, even if the stream is cut short later.
	usage := s.usage(req, reply)
	w.Header().Set("Content-Type", "application/vnd.amazon.eventstream")
	w.Header().Set("X-Amzn-Requestid", s.nextRequestID())
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)

	enc := eventstream.NewEncoder()
	sent := 0
	// send writes one event, or the reply's exception in its place once
	// After events went out. It reports whether the stream goes on.
	send := func(eventType string, payload any) bool {
		if e := reply.StreamErr; e != nil && sent == e.After {
			body, _ := json.Marshal(map[string]string{"message": e.Message})
			_ = enc.Encode(w, eventstream.Message{
				Headers: eventstream.Headers{
					{Name: ":message-type", Value: eventstream.StringValue("exception")},
					{Name: ":exception-type", Value: eventstream.StringValue(lowerFirst(e.Code))},
					{Name: ":content-type", Value: eventstream.StringValue("application/json")},
				},
				Payload: body,
			})
			if flusher != nil {
				flusher.Flush()
			}
			return false
		}
		if sent > 0 && reply.ChunkDelay > 0 {
			t := time.NewTimer(reply.ChunkDelay)
			defer t.Stop()
			select {
			case <-t.C:
			case <-r.Context().Done():
				return false
			case <-s.closed:
				panic(http.ErrAbortHandler)
			}
		}
		body, err := json.Marshal(payload)
		if err != nil {
			panic(http.ErrAbortHandler) // the payloads are this package's own maps, and JSON that scriptError checked
		}
		err = enc.Encode(w, eventstream.Message{
			Headers: eventstream.Headers{
				{Name: ":message-type", Value: eventstream.StringValue("event")},
				{Name: ":event-type", Value: eventstream.StringValue(eventType)},
				{Name: ":content-type", Value: eventstream.StringValue("application/json")},
			},
			Payload: body,
		})
		if flusher != nil {
			flusher.Flush()
		}
		sent++
		return err == nil
	}

	if !send("messageStart", map[string]any{"role": "assistant"}) {
		return
	}
	chunk := reply.ChunkBytes
	if chunk <= 0 {
		chunk = DefaultChunkBytes
	}
	for i, b := range reply.Content {
		if !streamBlock(send, i, b, chunk) {
			return
		}
	}
	if !send("messageStop", map[string]any{"stopReason": reply.stopReason()}) {
		return
	}
	metadata := map[string]any{
		"usage":   usage,
		"metrics": map[string]int64{"latencyMs": time.Since(start).Milliseconds()},
	}
	if trace := reply.trace(req); trace != nil {
		metadata["trace"] = trace
	}
	send("metadata", metadata)
}

// streamBlock sends content block i as Bedrock streams it: a start event for
// a toolUse, the deltas, and a stop event.
func streamBlock(send func(string, any) bool, i int, b ContentBlock, chunk int) bool {
	delta := func(d map[string]any) bool {
		return send("contentBlockDelta", map[string]any{"contentBlockIndex": i, "delta": d})
	}
	switch {
	case b.ToolUse != nil:
		if !send("contentBlockStart", map[string]any{"contentBlockIndex": i, "start": map[string]any{
			"toolUse": map[string]string{"toolUseId": b.ToolUse.ToolUseID, "name": b.ToolUse.Name},
		}}) {
			return false
		}
		for _, piece := range chunks(string(b.ToolUse.Input), chunk) {
			if !delta(map[string]any{"toolUse": map[string]string{"input": piece}}) {
				return false
			}
		}
	case b.ReasoningContent != nil && b.ReasoningContent.ReasoningText != nil:
		rt := b.ReasoningContent.ReasoningText
		for _, piece := range chunks(rt.Text, chunk) {
			if !delta(map[string]any{"reasoningContent": map[string]string{"text": piece}}) {
				return false
			}
		}
		if rt.Signature != "" && !delta(map[string]any{"reasoningContent": map[string]string{"signature": rt.Signature}}) {
			return false
		}
	default:
		// Text, including the empty text block some models send.
		pieces := chunks(b.Text, chunk)
		if len(pieces) == 0 {
			pieces = []string{""}
		}
		for _, piece := range pieces {
			if !delta(map[string]any{"text": piece}) {
				return false
			}
		}
	}
	return send("contentBlockStop", map[string]any{"contentBlockIndex": i})
}

// chunks cuts s into pieces of at most n bytes, at rune boundaries.
func chunks(s string, n int) []string {
	var out []string
	for len(s) > 0 {
		end := min(n, len(s))
		for end < len(s) && !utf8.RuneStart(s[end]) {
			end++
		}
		out = append(out, s[:end])
		s = s[end:]
	}
	return out
}

// lowerFirst turns an error code into the member name an event stream
// exception carries, such as "throttlingException".
func lowerFirst(code string) string {
	if code == "" {
		return code
	}
	return strings.ToLower(code[:1]) + code[1:]
}

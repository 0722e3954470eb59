package agentcoretest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/lambda-agent/lambda-agent/internal/testkit/awstest"
)

// event is a stored event, as its members go on the wire.
type event struct {
	MemoryID       string                     `json:"memoryId"`
	ActorID        string                     `json:"actorId"`
	SessionID      string                     `json:"sessionId"`
	EventID        string                     `json:"eventId"`
	EventTimestamp json.Number                `json:"eventTimestamp"`
	Payload        []json.RawMessage          `json:"payload"`
	Branch         *branch                    `json:"branch,omitempty"`
	Metadata       map[string]json.RawMessage `json:"metadata,omitempty"`

	at   float64 // EventTimestamp, for ordering
	seq  int     // creation order, for ties
	skip bool    // extractionMode SKIP: not an output member
}

type branch struct {
	Name        *string `json:"name"`
	RootEventID *string `json:"rootEventId,omitempty"`
}

type createEventInput struct {
	ActorID          *string                    `json:"actorId"`
	SessionID        *string                    `json:"sessionId"`
	EventTimestamp   *json.Number               `json:"eventTimestamp"`
	Payload          []json.RawMessage          `json:"payload"`
	Branch           *branch                    `json:"branch"`
	ClientToken      *string                    `json:"clientToken"`
	Metadata         map[string]json.RawMessage `json:"metadata"`
	ExtractionMode   *string                    `json:"extractionMode"`
	ExtractionConfig json.RawMessage            `json:"extractionConfig"`
}

// decode reads a JSON body into v; an empty body is {}.
func decode(body []byte, v any) *awstest.Error {
	if len(bytes.TrimSpace(body)) == 0 {
		body = []byte("{}")
	}
	d := json.NewDecoder(bytes.NewReader(body))
	d.UseNumber()
	if err := d.Decode(v); err != nil {
		return validation("CannotParse", "Could not parse the request body: %v", err)
	}
	return nil
}

func required(member string) *awstest.Error {
	return invalidField("1 validation error detected: Value null at '%s' failed to satisfy constraint: Member must not be null", member)
}

func (s *Server) createEvent(r *http.Request, body []byte) (int, any, *awstest.Error) {
	var in createEventInput
	if aerr := decode(body, &in); aerr != nil {
		return 0, nil, aerr
	}
	switch {
	case in.ActorID == nil:
		return 0, nil, required("actorId")
	case in.SessionID == nil:
		// Optional in the model; the service's answer without one is not
		// documented, and lambda-agent always sends one.
		return 0, nil, required("sessionId")
	case in.EventTimestamp == nil:
		return 0, nil, required("eventTimestamp")
	case in.Payload == nil:
		return 0, nil, required("payload")
	}
	if aerr := validActorSession(*in.ActorID, *in.SessionID); aerr != nil {
		return 0, nil, aerr
	}
	at, err := in.EventTimestamp.Float64()
	if err != nil {
		return 0, nil, validation("CannotParse", "eventTimestamp is not a number")
	}
	if aerr := validPayload(in.Payload); aerr != nil {
		return 0, nil, aerr
	}
	if aerr := validMetadata(in.Metadata); aerr != nil {
		return 0, nil, aerr
	}
	if in.Branch != nil && in.Branch.Name == nil {
		return 0, nil, required("branch.name")
	}
	if in.ExtractionMode != nil && *in.ExtractionMode != "SKIP" {
		return 0, nil, invalidField("1 validation error detected: Value '%s' at 'extractionMode' failed to satisfy constraint: Member must satisfy enum value set: [SKIP]", *in.ExtractionMode)
	}
	canonical, aerr := canonicalWithout(body, "clientToken")
	if aerr != nil {
		return 0, nil, aerr
	}

	s.mu.Lock()
	defer s.mu.Unlock()
	m, aerr := s.memoryLocked(r)
	if aerr != nil {
		return 0, nil, aerr
	}
	if in.ClientToken != nil {
		if prev, ok := m.byToken[*in.ClientToken]; ok {
			if prev.request != canonical {
				return 0, nil, validation("IdempotentParameterMismatchException",
					"The request uses the same client token as a previous, but non-identical request")
			}
			return http.StatusCreated, map[string]any{"event": prev.event}, nil
		}
	}
	ms := int64(at * 1000)
	e := &event{
		MemoryID:       r.PathValue("memoryId"),
		ActorID:        *in.ActorID,
		SessionID:      *in.SessionID,
		EventID:        strconv.FormatInt(ms, 10) + "#" + randomHex(8),
		EventTimestamp: *in.EventTimestamp,
		Payload:        in.Payload,
		Branch:         in.Branch,
		Metadata:       in.Metadata,
		at:             at,
		seq:            len(m.events),
		skip:           in.ExtractionMode != nil,
	}
	if len(m.events) > 0 {
		e.seq = m.events[len(m.events)-1].seq + 1
	}
	m.events = append(m.events, e)
	if in.ClientToken != nil {
		m.byToken[*in.ClientToken] = idempotent{request: canonical, event: e}
	}
	return http.StatusCreated, map[string]any{"event": e}, nil
}

var roles = []string{"ASSISTANT", "USER", "TOOL", "OTHER"}

// validPayload checks the payload list: at most MaxPayloadItems members,
// each a union with one member; conversational text of 1 to MaxText
// characters and a known role.
func validPayload(items []json.RawMessage) *awstest.Error {
	if len(items) > MaxPayloadItems {
		return invalidField("1 validation error detected: Value at 'payload' failed to satisfy constraint: Member must have length less than or equal to %d", MaxPayloadItems)
	}
	for i, raw := range items {
		var item map[string]json.RawMessage
		if aerr := decode(raw, &item); aerr != nil {
			return aerr
		}
		if len(item) != 1 {
			return invalidField("payload.%d must set exactly one of conversational, blob and json", i+1)
		}
		for k, v := range item {
			switch k {
			case "conversational":
				var c struct {
					Content map[string]json.RawMessage `json:"content"`
					Role    *string                    `json:"role"`
				}
				if aerr := decode(v, &c); aerr != nil {
					return aerr
				}
				if c.Role == nil {
					return required(fmt.Sprintf("payload.%d.member.conversational.role", i+1))
				}
				if !slices.Contains(roles, *c.Role) {
					return invalidField("1 validation error detected: Value '%s' at 'payload.%d.member.conversational.role' failed to satisfy constraint: Member must satisfy enum value set: %v", *c.Role, i+1, roles)
				}
				if len(c.Content) != 1 || c.Content["text"] == nil {
					return invalidField("payload.%d.member.conversational.content must set text", i+1)
				}
				var text string
				if err := json.Unmarshal(c.Content["text"], &text); err != nil {
					return validation("CannotParse", "payload.%d.member.conversational.content.text is not a string", i+1)
				}
				if n := utf8.RuneCountInString(text); n < 1 || n > MaxText {
					return invalidField("1 validation error detected: Value at 'payload.%d.member.conversational.content.text' failed to satisfy constraint: Member must have length between 1 and %d", i+1, MaxText)
				}
			case "blob", "json":
				if string(v) == "null" {
					return required(fmt.Sprintf("payload.%d.member.%s", i+1, k))
				}
			default:
				return invalidField("payload.%d has an unknown member %q", i+1, k)
			}
		}
	}
	return nil
}

func validMetadata(md map[string]json.RawMessage) *awstest.Error {
	if len(md) > MaxMetadata {
		return invalidField("1 validation error detected: Value at 'metadata' failed to satisfy constraint: Member must have length less than or equal to %d", MaxMetadata)
	}
	for k := range md {
		if aerr := validID("metadata.key", k, MaxMetadataKey, metadataKey); aerr != nil {
			return aerr
		}
	}
	return nil
}

type listEventsInput struct {
	IncludePayloads *bool           `json:"includePayloads"`
	MaxResults      *int            `json:"maxResults"`
	NextToken       *string         `json:"nextToken"`
	Filter          json.RawMessage `json:"filter"`
}

func (s *Server) listEvents(r *http.Request, body []byte) (int, any, *awstest.Error) {
	var in listEventsInput
	if aerr := decode(body, &in); aerr != nil {
		return 0, nil, aerr
	}
	actorID, sessionID := r.PathValue("actorId"), r.PathValue("sessionId")
	if aerr := validActorSession(actorID, sessionID); aerr != nil {
		return 0, nil, aerr
	}
	size, aerr := pageSize(in.MaxResults)
	if aerr != nil {
		return 0, nil, aerr
	}
	if len(in.Filter) > 0 && string(in.Filter) != "null" {
		return 0, nil, invalidField("agentcoretest: ListEvents filters are not modeled")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	m, aerr := s.memoryLocked(r)
	if aerr != nil {
		return 0, nil, aerr
	}
	request := r.URL.Path
	offset, aerr := s.resume(in.NextToken, "ListEvents", request)
	if aerr != nil {
		return 0, nil, aerr
	}
	var matched []*event
	for _, e := range m.events {
		if e.ActorID == actorID && e.SessionID == sessionID {
			matched = append(matched, e)
		}
	}
	slices.SortStableFunc(matched, func(a, b *event) int {
		if a.at != b.at {
			if a.at < b.at {
				return -1
			}
			return 1
		}
		return a.seq - b.seq
	})
	out := struct {
		Events    []event `json:"events"`
		NextToken *string `json:"nextToken,omitempty"`
	}{Events: []event{}}
	matched, out.NextToken = pageOf(s, matched, offset, size, "ListEvents", request)
	for _, e := range matched {
		c := *e
		if in.IncludePayloads != nil && !*in.IncludePayloads {
			c.Payload = []json.RawMessage{}
		}
		out.Events = append(out.Events, c)
	}
	return http.StatusOK, out, nil
}

func (s *Server) deleteEvent(r *http.Request, _ []byte) (int, any, *awstest.Error) {
	actorID, sessionID, eventID := r.PathValue("actorId"), r.PathValue("sessionId"), r.PathValue("eventId")
	if aerr := validActorSession(actorID, sessionID); aerr != nil {
		return 0, nil, aerr
	}
	if !eventIDPattern.MatchString(eventID) {
		return 0, nil, invalidField("1 validation error detected: Value '%s' at 'eventId' failed to satisfy constraint: Member must satisfy regular expression pattern: %s", eventID, eventIDPattern)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	m, aerr := s.memoryLocked(r)
	if aerr != nil {
		return 0, nil, aerr
	}
	i := slices.IndexFunc(m.events, func(e *event) bool {
		return e.EventID == eventID && e.ActorID == actorID && e.SessionID == sessionID
	})
	if i < 0 {
		return 0, nil, notFound("Event %s not found", eventID)
	}
	m.events = slices.Delete(m.events, i, i+1)
	return http.StatusOK, map[string]string{"eventId": eventID}, nil
}

// Events returns the events of actorID's session sessionID in memoryID,
// in the order ListEvents gives them, with their payloads as JSON: a test's
// view of what was mirrored.
func (s *Server) Events(memoryID, actorID, sessionID string) []Event {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := s.memories[memoryID]
	if m == nil {
		return nil
	}
	var out []Event
	for _, e := range m.events {
		if e.ActorID == actorID && e.SessionID == sessionID {
			out = append(out, Event{ID: e.EventID, Timestamp: time.UnixMilli(int64(e.at * 1000)).UTC(),
				Payload: slices.Clone(e.Payload), Metadata: metadataOf(e.Metadata), Skip: e.skip, at: e.at, seq: e.seq})
		}
	}
	slices.SortStableFunc(out, func(a, b Event) int {
		if a.at != b.at {
			if a.at < b.at {
				return -1
			}
			return 1
		}
		return a.seq - b.seq
	})
	return out
}

// Event is a stored event as [Server.Events] returns it.
type Event struct {
	ID        string
	Timestamp time.Time
	// Payload holds the payload members as they went on the wire, such as
	// {"conversational":{"content":{"text":"hi"},"role":"USER"}}.
	Payload []json.RawMessage
	// Metadata holds the string values of the event's metadata.
	Metadata map[string]string
	// Skip is an event created with extractionMode SKIP: no strategy
	// extracts from it.
	Skip bool

	at  float64
	seq int
}

// metadataOf is md's string values.
func metadataOf(md map[string]json.RawMessage) map[string]string {
	out := map[string]string{}
	for k, v := range md {
		var sv struct {
			StringValue *string `json:"stringValue"`
		}
		if json.Unmarshal(v, &sv) == nil && sv.StringValue != nil {
			out[k] = *sv.StringValue
		}
	}
	return out
}

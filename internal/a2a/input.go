package a2a

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/lambda-agent/lambda-agent/internal/agent"
)

// Bounds on a caller's message, besides the size of its content, which
// the HTTP API's limit bounds.
const (
	maxParts     = 20
	maxMessageID = 124 // an idempotency key is 128 characters at most, with "a2a:"
)

// documentTypes are the media types of the document formats Bedrock
// takes, by format.
var documentTypes = map[string]string{
	"pdf":  "application/pdf",
	"csv":  "text/csv",
	"doc":  "application/msword",
	"docx": "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
	"xls":  "application/vnd.ms-excel",
	"xlsx": "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
	"html": "text/html",
	"txt":  "text/plain",
	"md":   "text/markdown",
}

var imageTypes = map[string]string{"image/png": "png", "image/jpeg": "jpeg", "image/gif": "gif", "image/webp": "webp"}

// input is what a caller's message brings: the content of a new turn, or
// the responses to its task's interrupts: a data part {"responses": [...]},
// in the shape of POST /chat's, or text alone, which can answer a single
// question.
type input struct {
	content   []agent.ContentBlock
	responses []agent.Response
	// text is the message's text, when text is all it holds.
	text string
}

func invalid(format string, args ...any) *a2a.Error {
	return a2a.NewError(a2a.ErrInvalidParams, fmt.Sprintf(format, args...)).WithDetails(map[string]any{"code": "invalid_request"})
}

// readMessage reads a caller's message, checked as far as its own shape
// goes; the turn checks the content as every way in does.
func readMessage(m *a2a.Message) (*input, error) {
	switch {
	case m == nil:
		return nil, invalid("message is required")
	case m.Role != a2a.MessageRoleUser:
		return nil, invalid("message.role is %q; a caller's message is %q", m.Role, a2a.MessageRoleUser)
	case m.ID == "":
		return nil, invalid("message.messageId is required: it makes the message idempotent")
	case len(m.ID) > maxMessageID:
		return nil, invalid("message.messageId is %d characters; at most %d", len(m.ID), maxMessageID)
	case len(m.Parts) == 0:
		return nil, invalid("message.parts is empty")
	case len(m.Parts) > maxParts:
		return nil, invalid("message.parts has %d parts; at most %d", len(m.Parts), maxParts)
	}
	in := &input{}
	textOnly := true
	for i, p := range m.Parts {
		if p == nil {
			return nil, invalid("message.parts[%d] is null", i)
		}
		switch c := p.Content.(type) {
		case a2a.Text:
			in.content = append(in.content, agent.Text(string(c)))
			in.text += string(c)
			continue
		case a2a.Data:
			responses, ok, err := responsesOf(c.Value)
			switch {
			case err != nil:
				return nil, invalid("message.parts[%d]: %v", i, err)
			case ok && len(m.Parts) > 1:
				return nil, invalid("a data part of responses answers the task's interrupts, and comes alone")
			case ok:
				in.responses = responses
				return in, nil
			}
			raw, err := json.Marshal(c.Value)
			if err != nil {
				return nil, invalid("message.parts[%d]: %v", i, err)
			}
			in.content = append(in.content, agent.Text(string(raw)))
		case a2a.Raw:
			b, err := mediaBlock(p, c)
			if err != nil {
				return nil, err
			}
			in.content = append(in.content, b)
		case a2a.URL:
			return nil, a2a.NewError(a2a.ErrUnsupportedContentType, fmt.Sprintf("message.parts[%d] is a url part: the agent fetches no URL a caller names; send the bytes as a raw part", i)).
				WithDetails(map[string]any{"code": "invalid_content"})
		default:
			return nil, invalid("message.parts[%d] holds no text, raw, url or data", i)
		}
		textOnly = false
	}
	if !textOnly {
		in.text = ""
	}
	return in, nil
}

// responsesOf reads a data part that answers interrupts: an object whose
// one member is responses. ok is false for any other data.
func responsesOf(v any) (responses []agent.Response, ok bool, err error) {
	obj, isObj := v.(map[string]any)
	if !isObj || len(obj) != 1 || obj["responses"] == nil {
		return nil, false, nil
	}
	raw, _ := json.Marshal(obj["responses"]) // decoded from JSON
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&responses); err != nil {
		return nil, true, fmt.Errorf("responses: %w", err)
	}
	if len(responses) == 0 {
		return nil, true, fmt.Errorf("responses is empty: answer each interrupt the task lists")
	}
	return responses, true, nil
}

var unsafeName = regexp.MustCompile(`[^a-zA-Z0-9 ()\[\]-]+`)

// mediaBlock is a raw part as an image or a document, by its media type.
func mediaBlock(p *a2a.Part, raw a2a.Raw) (agent.ContentBlock, error) {
	mediaType, _, _ := strings.Cut(strings.ToLower(p.MediaType), ";")
	if format, ok := imageTypes[mediaType]; ok {
		return agent.ContentBlock{Image: &agent.ImageBlock{Format: format, Source: agent.Source{Bytes: raw}}}, nil
	}
	for format, t := range documentTypes {
		if t == mediaType {
			name := strings.Join(strings.Fields(unsafeName.ReplaceAllString(p.Filename, " ")), " ")
			if name == "" {
				name = "document"
			}
			return agent.ContentBlock{Document: &agent.DocumentBlock{Format: format, Name: name, Source: agent.Source{Bytes: raw}}}, nil
		}
	}
	return agent.ContentBlock{}, a2a.NewError(a2a.ErrUnsupportedContentType,
		fmt.Sprintf("a raw part of media type %q: the agent takes images (png, jpeg, gif, webp) and documents (pdf, csv, doc, docx, xls, xlsx, html, txt, md)", p.MediaType)).
		WithDetails(map[string]any{"code": "invalid_content"})
}

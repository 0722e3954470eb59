package httpapi_test

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/lambda-agent/lambda-agent/internal/testkit/conversetest"
)

// The first bytes of real files, base64-encoded as a request carries them.
var (
	realPNG  = base64.StdEncoding.EncodeToString([]byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x00\x01"))
	realJPEG = base64.StdEncoding.EncodeToString([]byte("\xff\xd8\xff\xe0\x00\x10JFIF\x00\x01"))
	realDOCX = base64.StdEncoding.EncodeToString([]byte("PK\x03\x04\x14\x00\x06\x00\x08\x00"))
)

// withContent is a chat body of text and one more block, on session.
func withContent(session, block string) string {
	return `{"session_id":"` + session + `","content":[{"text":"what is this?"},` + block + `]}`
}

func imageBlock(format, b64 string) string {
	return `{"image":{"format":"` + format + `","source":{"bytes":"` + b64 + `"}}}`
}

// lastLogLine returns the last request's log line.
func (a *api) lastLogLine(t *testing.T) map[string]any {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(a.logs.String()), "\n")
	var line map[string]any
	if err := json.Unmarshal([]byte(lines[len(lines)-1]), &line); err != nil {
		t.Fatal(err)
	}
	return line
}

func TestMislabelledMediaGet400BeforeTheModel(t *testing.T) {
	a := newAPI(t, nil)
	srv := a.streamServer(t)
	if r := a.chat(t, "", "pictures", "hello"); r.status != 200 {
		t.Fatal(r.raw)
	}
	before := a.transcript(t, "", "pictures").raw
	calls := a.model.Calls()
	tests := []struct {
		name  string
		block string
		want  string // the message
	}{
		{"a JPEG labelled png", imageBlock("png", realJPEG),
			`invalid input: content[1]: image: the bytes are not a PNG image (they look like JPEG); set "format": "jpeg"`},
		{"garbage labelled png", imageBlock("png", base64.StdEncoding.EncodeToString([]byte{0xde, 0xad, 0xbe, 0xef, 0, 1})),
			`invalid input: content[1]: image: the bytes are not a PNG image (they begin de ad be ef 00 01, which is no format Bedrock reads)`},
		{"text labelled png", imageBlock("png", base64.StdEncoding.EncodeToString([]byte("hello"))),
			`invalid input: content[1]: image: the bytes are not a PNG image (they look like text)`},
		{"a PNG encoded twice", imageBlock("png", base64.StdEncoding.EncodeToString([]byte(realPNG))),
			`invalid input: content[1]: image: the bytes are not a PNG image (they look like PNG in base64); the file was base64-encoded twice; encode it once`},
		{"a docx labelled pdf", `{"document":{"format":"pdf","name":"report","source":{"bytes":"` + realDOCX + `"}}}`,
			`invalid input: content[1]: document: the bytes are not a PDF document (they look like a ZIP archive, as docx and xlsx are); set "format": "docx" or "xlsx"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body := withContent("pictures", tt.block)
			r := a.invoke(t, request{route: "chat-new.json", body: body})
			if r.status != 400 || r.errorCode() != "invalid_content" || r.errorMessage() != tt.want {
				t.Errorf("%d %s\nwant 400 invalid_content %q", r.status, r.raw, tt.want)
			}
			// An edit's content passes the same checks.
			edit := `{"session_id":"pictures","edit":{"from":0,"content":[{"text":"what is this?"},` + tt.block + `]}}`
			if r := a.invoke(t, request{route: "chat-new.json", body: edit}); r.status != 400 || r.errorCode() != "invalid_content" ||
				r.errorMessage() != tt.want {
				t.Errorf("edit: %d %s", r.status, r.raw)
			}
			resp := stream(t, srv, json.RawMessage(body), nil)
			var streamed struct {
				Error struct{ Code, Message string }
			}
			if err := json.NewDecoder(resp.Body).Decode(&streamed); err != nil || resp.StatusCode != 400 || streamed.Error.Code != "invalid_content" || streamed.Error.Message != tt.want {
				t.Errorf("stream: %d %+v (%v), want 400 invalid_content", resp.StatusCode, streamed.Error, err)
			}
		})
	}
	if got := a.model.Calls(); got != calls {
		t.Errorf("the model was called %d times for mislabelled media", got-calls)
	}
	if after := a.transcript(t, "", "pictures").raw; after != before {
		t.Errorf("the session changed:\nbefore %s\nafter  %s", before, after)
	}
}

func TestBedrockRefusingAnAttachedImageIs400(t *testing.T) {
	a := newAPI(t, nil)
	// The bytes begin like a PNG, so only the model finds them unreadable.
	a.model.Enqueue(conversetest.UnreadableImage())
	r := a.invoke(t, request{route: "chat-new.json", body: withContent("refused", imageBlock("png", realPNG)), headers: map[string]string{"Idempotency-Key": "k-refused"}})
	want := "invalid input: Bedrock refused the attached image: The model returned the following errors: Could not process image"
	if r.status != 400 || r.errorCode() != "invalid_content" || r.errorMessage() != want {
		t.Fatalf("%d %s\nwant 400 invalid_content %q", r.status, r.raw, want)
	}
	if a.model.Calls() != 1 {
		t.Errorf("%d model calls, want the 1 refused", a.model.Calls())
	}
	// The failed turn is logged with what it used, as other failed turns are.
	if line := a.lastLogLine(t); line["status"] != 400.0 || line["outcome"] != "invalid_content" || line["model_calls"] != 1.0 || line["input_tokens"] == nil {
		t.Errorf("log line of the refused turn: %v", line)
	}
	if tr := a.transcript(t, "", "refused"); tr.status != 404 {
		t.Errorf("the refused turn was stored: %d %s", tr.status, tr.raw)
	}
	// Nothing holds the idempotency key: the corrected request goes through.
	r = a.invoke(t, request{route: "chat-new.json", body: withContent("refused", imageBlock("png", realPNG)), headers: map[string]string{"Idempotency-Key": "k-refused"}})
	if r.status != 200 || len(messagesOf(r)) != 2 {
		t.Errorf("the request sent again: %d %s", r.status, r.raw)
	}
}

func TestBedrockRefusingAnAttachedImageIsAStreamError(t *testing.T) {
	a := newAPI(t, nil)
	srv := a.streamServer(t)
	a.model.Enqueue(conversetest.UnreadableImage())
	evs := streamAll(t, srv, json.RawMessage(withContent("streamed", imageBlock("png", realPNG))), nil)
	if got := names(evs); got != "start error" {
		t.Fatalf("events %q, want start error", got)
	}
	e, _ := evs[1].data["error"].(map[string]any)
	if e["code"] != "invalid_content" || !strings.Contains(e["message"].(string), "Could not process image") {
		t.Errorf("error event %v", evs[1].data)
	}
	if tr := a.transcript(t, "", "streamed"); tr.status != 404 {
		t.Errorf("the refused turn was stored: %d %s", tr.status, tr.raw)
	}
}

func TestOtherValidationErrorsStay502(t *testing.T) {
	a := newAPI(t, nil)
	if r := a.invoke(t, request{route: "chat-new.json", body: withContent("album", imageBlock("png", realPNG))}); r.status != 200 {
		t.Fatal(r.raw)
	}
	before := a.transcript(t, "", "album").raw
	tests := []struct {
		name  string
		reply conversetest.Reply
		body  string
	}{
		// Not about content, though the turn attaches an image.
		{"a malformed request", conversetest.Error(http.StatusBadRequest, conversetest.CodeValidation, "Malformed input request: #: extraneous key [top_k] is not permitted, please reformat your input and try again."),
			withContent("album", imageBlock("png", realPNG))},
		// About an image, but the turn attaches none: the one refused is in
		// the stored history, which this request cannot change.
		{"an image of an earlier turn", conversetest.UnreadableImage(),
			`{"session_id":"album","message":"and this one?"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a.model.Enqueue(tt.reply)
			r := a.invoke(t, request{route: "chat-new.json", body: tt.body})
			if r.status != 502 || r.errorCode() != "model_error" {
				t.Errorf("%d %s, want 502 model_error", r.status, r.raw)
			}
		})
	}
	if after := a.transcript(t, "", "album").raw; after != before {
		t.Errorf("a failed turn changed the session:\nbefore %s\nafter  %s", before, after)
	}
}

package agent_test

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"github.com/lambda-agent/lambda-agent/internal/agent"
	"github.com/lambda-agent/lambda-agent/internal/testkit/conversetest"
	"github.com/lambda-agent/lambda-agent/internal/tools"
)

// Real first bytes of each kind of file.
var (
	pngHead, jpegHead, gifHead, webpHead = conversetest.PNGStart, conversetest.JPEGStart, conversetest.GIFStart, conversetest.WebPStart
	pdfHead, zipHead, oleHead            = conversetest.PDFStart, conversetest.ZIPStart, conversetest.OLEStart
)

func withImage(format string, b []byte) []agent.ContentBlock {
	return []agent.ContentBlock{agent.Text("look"), {Image: &agent.ImageBlock{Format: format, Source: agent.Source{Bytes: b}}}}
}

func withDocument(format string, b []byte) []agent.ContentBlock {
	return []agent.ContentBlock{agent.Text("read"), {Document: &agent.DocumentBlock{Format: format, Name: "file", Source: agent.Source{Bytes: b}}}}
}

func TestValidateInputChecksMediaBytes(t *testing.T) {
	tests := []struct {
		name string
		in   []agent.ContentBlock
		want string // the reason, "" when the input is valid
	}{
		{"png", withImage("png", pngHead), ""},
		{"jpeg", withImage("jpeg", jpegHead), ""},
		{"gif89a", withImage("gif", gifHead), ""},
		{"gif87a", withImage("gif", []byte("GIF87a\x01\x00")), ""},
		{"webp", withImage("webp", webpHead), ""},
		{"pdf", withDocument("pdf", pdfHead), ""},
		{"pdf after junk", withDocument("pdf", append([]byte("\xef\xbb\xbf\r\n"), pdfHead...)), ""},
		{"docx", withDocument("docx", zipHead), ""},
		{"xlsx", withDocument("xlsx", zipHead), ""},
		{"doc", withDocument("doc", oleHead), ""},
		{"xls", withDocument("xls", oleHead), ""},
		{"txt", withDocument("txt", []byte("naïve text ✓\n")), ""},
		{"txt with a byte-order mark", withDocument("txt", []byte("\xef\xbb\xbfhello")), ""},
		{"csv", withDocument("csv", []byte("name,age\nAda,36\n")), ""},
		{"html", withDocument("html", []byte("<!doctype html><p>hi</p>")), ""},
		{"md", withDocument("md", []byte("# Title\n")), ""},
		{"text that mentions a PDF", withDocument("txt", []byte("a file begins %PDF-1.7")), ""},

		{"png holding jpeg", withImage("png", jpegHead), `content[1]: image: the bytes are not a PNG image (they look like JPEG); set "format": "jpeg"`},
		{"jpeg holding png", withImage("jpeg", pngHead), `content[1]: image: the bytes are not a JPEG image (they look like PNG); set "format": "png"`},
		{"gif holding webp", withImage("gif", webpHead), `content[1]: image: the bytes are not a GIF image (they look like WebP); set "format": "webp"`},
		{"webp holding gif", withImage("webp", gifHead), `content[1]: image: the bytes are not a WebP image (they look like GIF); set "format": "gif"`},
		{"webp holding a wav", withImage("webp", []byte("RIFF\x24\x00\x00\x00WAVEfmt ")), `content[1]: image: the bytes are not a WebP image (they begin 52 49 46 46 24 00 00 00, which is no format Bedrock reads)`},
		{"png holding text", withImage("png", []byte("not a picture")), `content[1]: image: the bytes are not a PNG image (they look like text)`},
		{"png cut short", withImage("png", pngHead[:3]), `content[1]: image: the bytes are not a PNG image (they begin 89 50 4e, which is no format Bedrock reads)`},
		{"png of one NUL", withImage("png", []byte{0}), `content[1]: image: the bytes are not a PNG image (they begin 00, which is no format Bedrock reads)`},
		{"png holding pdf", withImage("png", pdfHead), `content[1]: image: the bytes are not a PNG image (they look like PDF); send it as a document with "format": "pdf"`},
		{"png encoded twice", withImage("png", []byte(base64.StdEncoding.EncodeToString(pngHead))), `content[1]: image: the bytes are not a PNG image (they look like PNG in base64); the file was base64-encoded twice; encode it once`},
		{"png as a data URL", withImage("png", []byte("data:image/png;base64,iVBORw0KGgo=")), `content[1]: image: the bytes are not a PNG image (they look like a data URL); send only the base64 after its comma as "bytes"`},
		{"empty image", withImage("png", nil), `content[1]: image: no bytes`},

		{"pdf holding png", withDocument("pdf", pngHead), `content[1]: document: the bytes are not a PDF document (they look like PNG); send it as an image with "format": "png"`},
		{"pdf holding text", withDocument("pdf", []byte("just some words")), `content[1]: document: the bytes are not a PDF document (they look like text); use a text format: "txt", "md", "csv" or "html"`},
		{"pdf holding docx", withDocument("pdf", zipHead), `content[1]: document: the bytes are not a PDF document (they look like a ZIP archive, as docx and xlsx are); set "format": "docx" or "xlsx"`},
		{"pdf cut short", withDocument("pdf", []byte("%PDF")), `content[1]: document: the bytes are not a PDF document (they look like text); use a text format: "txt", "md", "csv" or "html"`},
		{"pdf encoded twice", withDocument("pdf", []byte(base64.StdEncoding.EncodeToString(pdfHead))), `content[1]: document: the bytes are not a PDF document (they look like PDF in base64); the file was base64-encoded twice; encode it once`},
		{"docx holding doc", withDocument("docx", oleHead), `content[1]: document: the bytes are not a DOCX document (they look like an OLE2 compound file, as doc and xls are); set "format": "doc"`},
		{"xlsx holding xls", withDocument("xlsx", oleHead), `content[1]: document: the bytes are not an XLSX document (they look like an OLE2 compound file, as doc and xls are); set "format": "xls"`},
		{"doc holding docx", withDocument("doc", zipHead), `content[1]: document: the bytes are not a DOC document (they look like a ZIP archive, as docx and xlsx are); set "format": "docx"`},
		{"xls holding xlsx", withDocument("xls", zipHead), `content[1]: document: the bytes are not an XLS document (they look like a ZIP archive, as docx and xlsx are); set "format": "xlsx"`},
		{"doc holding pdf", withDocument("doc", pdfHead), `content[1]: document: the bytes are not a DOC document (they look like PDF); set "format": "pdf"`},
		{"txt with a NUL", withDocument("txt", []byte("ab\x00cd")), `content[1]: document: the bytes are not UTF-8 text (byte 2 is NUL); send the text encoded as UTF-8`},
		{"csv in Latin-1", withDocument("csv", []byte("caf\xe9,1\n")), `content[1]: document: the bytes are not UTF-8 text (they are not UTF-8 from byte 3); send the text encoded as UTF-8`},
		{"md in UTF-16", withDocument("md", []byte("\xff\xfe#\x00")), `content[1]: document: the bytes are not UTF-8 text (byte 3 is NUL); send the text encoded as UTF-8`},
		{"html holding png", withDocument("html", pngHead), `content[1]: document: the bytes are not UTF-8 text (they look like PNG); send it as an image with "format": "png"`},
		{"txt holding xlsx", withDocument("txt", zipHead), `content[1]: document: the bytes are not UTF-8 text (they look like a ZIP archive, as docx and xlsx are); set "format": "docx" or "xlsx"`},

		{"the block is named", append(withImage("png", pngHead), agent.ContentBlock{Image: &agent.ImageBlock{Format: "gif", Source: agent.Source{Bytes: jpegHead}}}),
			`content[2]: image: the bytes are not a GIF image (they look like JPEG); set "format": "jpeg"`},
		{"the request's shape is checked first", []agent.ContentBlock{{Document: &agent.DocumentBlock{Format: "pdf", Name: "file", Source: agent.Source{Bytes: pngHead}}}},
			`a document needs a text block beside it`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := agent.ValidateInput(tt.in)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("ValidateInput: %v", err)
				}
				return
			}
			var ie *agent.InputError
			if !errors.As(err, &ie) || !errors.Is(err, agent.ErrInvalidInput) {
				t.Fatalf("ValidateInput = %v, want an *InputError of ErrInvalidInput", err)
			}
			if ie.Reason != tt.want {
				t.Errorf("reason\n got %s\nwant %s", ie.Reason, tt.want)
			}
		})
	}
}

func TestMislabelledMediaNeverReachTheModel(t *testing.T) {
	s := newServer(t)
	a := newAgent(t, s, agent.Config{})
	for _, in := range [][]agent.ContentBlock{withImage("png", jpegHead), withImage("png", []byte("garbage")), withDocument("pdf", oleHead)} {
		if _, err := a.Run(t.Context(), &agent.Conversation{}, in); !errors.Is(err, agent.ErrInvalidInput) {
			t.Errorf("Run: err = %v, want ErrInvalidInput", err)
		}
		if _, err := a.Stream(t.Context(), &agent.Conversation{}, in, func(agent.Event) {}); !errors.Is(err, agent.ErrInvalidInput) {
			t.Errorf("Stream: err = %v, want ErrInvalidInput", err)
		}
	}
	if s.Calls() != 0 {
		t.Errorf("the model was called %d times", s.Calls())
	}
}

// refusal checks that err is the caller's error for Bedrock's refusal of
// attached media, in a TurnError that counts the refused call.
func refusal(t *testing.T, err error, what string) {
	t.Helper()
	var ie *agent.InputError
	if !errors.As(err, &ie) || !errors.Is(err, agent.ErrInvalidInput) {
		t.Fatalf("err = %v, want an *InputError of ErrInvalidInput", err)
	}
	if want := "Bedrock refused the attached " + what + ": The model returned the following errors: Could not process image"; ie.Reason != want {
		t.Errorf("reason\n got %s\nwant %s", ie.Reason, want)
	}
	var te *agent.TurnError
	if !errors.As(err, &te) || te.Metrics.ModelCalls != 1 {
		t.Errorf("err = %#v, want a TurnError that counts 1 model call", err)
	}
	if !agent.IsModelError(err, agent.KindInvalidContent) {
		t.Errorf("err = %v does not keep the model's error as its cause", err)
	}
}

func TestRefusedMediaOfTheInputIsTheCallersError(t *testing.T) {
	tests := []struct {
		name string
		in   []agent.ContentBlock
		what string
	}{
		{"an image", withImage("png", pngHead), "image"},
		{"two images", append(withImage("png", pngHead), agent.ContentBlock{Image: &agent.ImageBlock{Format: "gif", Source: agent.Source{Bytes: gifHead}}}), "images"},
		{"a document", withDocument("pdf", pdfHead), "document"},
		{"both", append(withDocument("pdf", pdfHead), agent.ContentBlock{Image: &agent.ImageBlock{Format: "png", Source: agent.Source{Bytes: pngHead}}}), "images and documents"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newServer(t)
			a := newAgent(t, s, agent.Config{})
			s.Enqueue(conversetest.UnreadableImage())
			res, err := a.Run(t.Context(), &agent.Conversation{}, tt.in)
			if res != nil {
				t.Errorf("a refused turn returned a result to store: %+v", res)
			}
			refusal(t, err, tt.what)

			s.Enqueue(conversetest.UnreadableImage())
			var events int
			res, err = a.Stream(t.Context(), &agent.Conversation{}, tt.in, func(agent.Event) { events++ })
			if res != nil || events != 0 {
				t.Errorf("a refused stream returned %+v after %d events", res, events)
			}
			refusal(t, err, tt.what)
		})
	}
}

func TestRefusedMediaNotOfTheInputIsAModelError(t *testing.T) {
	t.Run("other validation errors", func(t *testing.T) {
		s := newServer(t)
		a := newAgent(t, s, agent.Config{})
		s.Enqueue(conversetest.Error(400, conversetest.CodeValidation, "Malformed input request: #: extraneous key [top_k] is not permitted, please reformat your input and try again."))
		_, err := a.Run(t.Context(), &agent.Conversation{}, withImage("png", pngHead))
		if errors.Is(err, agent.ErrInvalidInput) || !agent.IsModelError(err, agent.KindInvalid) {
			t.Errorf("err = %v, want a model error of kind invalid", err)
		}
	})
	t.Run("media in the stored history", func(t *testing.T) {
		s := newServer(t)
		a := newAgent(t, s, agent.Config{})
		conv := &agent.Conversation{Messages: []agent.Message{
			{Role: agent.RoleUser, Content: withImage("png", pngHead)},
			agent.AssistantText("A picture."),
		}}
		s.Enqueue(conversetest.UnreadableImage())
		_, err := a.Run(t.Context(), conv, input("and now?"))
		if errors.Is(err, agent.ErrInvalidInput) || !agent.IsModelError(err, agent.KindInvalidContent) {
			t.Errorf("err = %v, want a model error of kind invalid content", err)
		}
	})
	t.Run("after an answer of the same turn", func(t *testing.T) {
		// The first call took the input's image; what the second refused
		// came from the turn's own work, such as a tool's result.
		s := newServer(t)
		a := newAgent(t, s, agent.Config{Tools: []agent.Tool{tools.Calculator()}})
		s.Enqueue(
			conversetest.ToolUse("c1", "calculator", map[string]string{"expression": "6*7"}).WithUsage(40, 5),
			conversetest.UnreadableImage(),
		)
		_, err := a.Run(t.Context(), &agent.Conversation{}, withImage("png", pngHead))
		if errors.Is(err, agent.ErrInvalidInput) || !agent.IsModelError(err, agent.KindInvalidContent) {
			t.Errorf("err = %v, want a model error of kind invalid content", err)
		}
		var te *agent.TurnError
		if !errors.As(err, &te) || te.Usage.InputTokens != 40 || te.Metrics.ModelCalls != 2 {
			t.Errorf("err = %#v, want a TurnError with the first call's 40 input tokens and 2 calls", err)
		}
	})
}

func TestMediaRefusalMessageQuotesBedrock(t *testing.T) {
	s := newServer(t)
	a := newAgent(t, s, agent.Config{})
	const bedrock = "The model returned the following errors: messages.0.content.1.image.source.bytes: The image was specified using the image/png media type, but the image appears to be a image/webp image"
	s.Enqueue(conversetest.Error(400, conversetest.CodeValidation, bedrock))
	_, err := a.Run(t.Context(), &agent.Conversation{}, withImage("png", pngHead))
	var ie *agent.InputError
	if !errors.As(err, &ie) || !strings.HasSuffix(ie.Reason, ": "+bedrock) {
		t.Errorf("err = %v, want an *InputError that quotes %q", err, bedrock)
	}
}

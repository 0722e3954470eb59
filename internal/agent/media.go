package agent

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// A signature is a kind of file, recognised by its bytes.
type signature struct {
	// kind says what the bytes look like, in messages: "they look like JPEG".
	kind string
	// formats are the formats whose bytes look so.
	formats []string
	match   func([]byte) bool
}

// signatures are the kinds of file an image or a document may be. Bedrock
// refuses bytes that are not their declared format, in the model's words
// and after a round trip; checked here, they are refused before any call,
// with what the bytes look like and how to label them. Only the first bytes
// are checked: a file damaged further on still reaches the model, whose
// refusal is then the caller's error too (see turn.refusedContent).
var signatures = []signature{
	{"PNG", []string{"png"}, prefix("\x89PNG\r\n\x1a\n")},
	{"JPEG", []string{"jpeg"}, prefix("\xff\xd8\xff")},
	{"GIF", []string{"gif"}, func(b []byte) bool { return prefix("GIF87a")(b) || prefix("GIF89a")(b) }},
	{"WebP", []string{"webp"}, func(b []byte) bool { return len(b) >= 12 && string(b[:4]) == "RIFF" && string(b[8:12]) == "WEBP" }},
	// PDF readers accept the header anywhere in the first 1024 bytes, after
	// whatever a tool put before it; so does this.
	{"PDF", []string{"pdf"}, func(b []byte) bool { return bytes.Contains(b[:min(len(b), 1024)], []byte("%PDF-")) }},
	{"a ZIP archive, as docx and xlsx are", []string{"docx", "xlsx"}, prefix("PK\x03\x04")},
	{"an OLE2 compound file, as doc and xls are", []string{"doc", "xls"}, prefix("\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1")},
	// Text formats have no signature. The model reads their bytes as text,
	// and nothing in the request declares an encoding, so they must be
	// UTF-8. A NUL byte, which no text document holds, marks binary data or
	// UTF-16.
	{"text", []string{"csv", "html", "txt", "md"}, func(b []byte) bool { return textProblem(b) == "" }},
}

func prefix(p string) func([]byte) bool {
	return func(b []byte) bool { return bytes.HasPrefix(b, []byte(p)) }
}

// formatNames name what each format's bytes must be, in messages.
var formatNames = map[string]string{
	"png": "a PNG image", "jpeg": "a JPEG image", "gif": "a GIF image", "webp": "a WebP image",
	"pdf": "a PDF document", "docx": "a DOCX document", "xlsx": "an XLSX document",
	"doc": "a DOC document", "xls": "an XLS document",
	"csv": "UTF-8 text", "html": "UTF-8 text", "txt": "UTF-8 text", "md": "UTF-8 text",
}

// textProblem says why b is not text, or returns "".
func textProblem(b []byte) string {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		return fmt.Sprintf("byte %d is NUL", i)
	}
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n <= 1 {
			return fmt.Sprintf("they are not UTF-8 from byte %d", i)
		}
		i += n
	}
	return ""
}

// checkBytes checks that the bytes of an image (image set) or a document are
// of the declared format, which ValidateInput has checked is a known one.
// The error says what the bytes look like and, when it can tell, how to
// label them.
func checkBytes(format string, image bool, b []byte) error {
	i := slices.IndexFunc(signatures, func(s signature) bool { return slices.Contains(s.formats, format) })
	if i < 0 || signatures[i].match(b) {
		return nil
	}
	what, fix := "", ""
	j := slices.IndexFunc(signatures, func(s signature) bool { return s.match(b) })
	switch {
	case j < 0 && signatures[i].kind == "text":
		what, fix = textProblem(b), "send the text encoded as UTF-8"
	case j < 0:
		what = fmt.Sprintf("they begin % x, which is no format Bedrock reads", b[:min(len(b), 8)])
	case signatures[j].kind == "text":
		what, fix = describeText(b, image)
	default:
		what, fix = "they look like "+signatures[j].kind, relabel(format, image, signatures[j].formats)
	}
	msg := fmt.Sprintf("the bytes are not %s (%s)", formatNames[format], what)
	if fix != "" {
		msg += "; " + fix
	}
	return errors.New(msg)
}

// describeText says what text that came as a file's bytes looks like, and
// how to send it. Often it is the file encoded once more than JSON needs,
// as base64 or as a data URL.
func describeText(b []byte, image bool) (what, fix string) {
	if bytes.HasPrefix(b, []byte("data:")) {
		return "they look like a data URL", `send only the base64 after its comma as "bytes"`
	}
	head := b[:min(len(b), 16)&^3]
	if raw, err := base64.StdEncoding.DecodeString(string(head)); err == nil && len(raw) > 0 {
		for _, s := range signatures {
			if s.kind != "text" && s.match(raw) {
				return "they look like " + s.kind + " in base64", "the file was base64-encoded twice; encode it once"
			}
		}
	}
	if image {
		return "they look like text", ""
	}
	return "they look like text", `use a text format: "txt", "md", "csv" or "html"`
}

// relabel says how to label bytes that have one of formats; image says
// whether they came as an image.
func relabel(declared string, image bool, formats []string) string {
	// A doc that is really a docx is most likely Word's other format, not
	// Excel's.
	sibling := map[string]string{"doc": "docx", "docx": "doc", "xls": "xlsx", "xlsx": "xls"}
	if f := sibling[declared]; slices.Contains(formats, f) {
		formats = []string{f}
	}
	quoted := make([]string, len(formats))
	for i, f := range formats {
		quoted[i] = strconv.Quote(f)
	}
	label := `"format": ` + strings.Join(quoted, " or ")
	switch isImage := slices.Contains(imageFormats, formats[0]); {
	case isImage == image:
		return "set " + label
	case isImage:
		return "send it as an image with " + label
	default:
		return "send it as a document with " + label
	}
}

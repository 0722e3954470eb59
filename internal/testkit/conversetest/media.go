package conversetest

import (
	"bytes"
	"fmt"
	"unicode/utf8"
)

// The texts with which Bedrock refuses an image or a document whose bytes
// are not what its format says. They are the model's (Claude's) words,
// which Bedrock passes on; the server puts the block's path before them.
const (
	// imageMismatchMessage takes the declared and the detected media types.
	imageMismatchMessage    = "The image was specified using the %s media type, but the image appears to be a %s image"
	unreadableImageMessage  = "Could not process image"
	invalidPDFMessage       = "The PDF specified was not valid"
	unparsedDocumentMessage = "The document source bytes could not be parsed as the specified format"
)

// The first bytes of real files of each kind Bedrock reads, for tests that
// send images and documents: the stand-in, and Bedrock, recognise them.
var (
	PNGStart  = []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
	JPEGStart = []byte("\xff\xd8\xff\xe0\x00\x10JFIF\x00")
	GIFStart  = []byte("GIF89a\x01\x00\x01\x00")
	WebPStart = []byte("RIFF\x24\x00\x00\x00WEBPVP8 ")
	PDFStart  = []byte("%PDF-1.7\n%\xe2\xe3\xcf\xd3\n")
	// ZIPStart begins docx and xlsx files, OLEStart doc and xls files.
	ZIPStart = []byte("PK\x03\x04\x14\x00\x06\x00")
	OLEStart = []byte("\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1\x00\x00")
)

// imageType returns the media type that b begins like, or "". A model tells
// images apart by their first bytes, whatever the request says they are.
func imageType(b []byte) string {
	switch {
	case bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")):
		return "image/png"
	case bytes.HasPrefix(b, []byte("\xff\xd8\xff")):
		return "image/jpeg"
	case bytes.HasPrefix(b, []byte("GIF87a")), bytes.HasPrefix(b, []byte("GIF89a")):
		return "image/gif"
	case len(b) >= 12 && string(b[:4]) == "RIFF" && string(b[8:12]) == "WEBP":
		return "image/webp"
	}
	return ""
}

// imageProblem returns what Bedrock says of an image of the given format
// (one it supports) whose bytes are b, or "" when it takes them. It checks
// only the first bytes: an image damaged further on passes here, and a
// test scripts [UnreadableImage] to have it refused.
func imageProblem(format string, b []byte) string {
	got, want := imageType(b), "image/"+format
	switch got {
	case want:
		return ""
	case "":
		return unreadableImageMessage
	}
	return fmt.Sprintf(imageMismatchMessage, want, got)
}

// documentProblem returns what Bedrock says of a document of the given
// format (one it supports) whose bytes are b, or "" when it takes them.
// Binary formats must begin with their signature: PDF's "%PDF-" (which
// readers find anywhere in the first 1024 bytes), the ZIP archive of docx
// and xlsx, or the OLE2 compound file of doc and xls. Text formats must be
// UTF-8 without NUL bytes: Bedrock reads their bytes as text, and asks for
// source.text instead when it cannot.
func documentProblem(format string, b []byte) string {
	var ok bool
	switch format {
	case "pdf":
		ok = bytes.Contains(b[:min(len(b), 1024)], []byte("%PDF-"))
	case "docx", "xlsx":
		ok = bytes.HasPrefix(b, []byte("PK\x03\x04"))
	case "doc", "xls":
		ok = bytes.HasPrefix(b, []byte("\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"))
	default: // csv, html, txt, md
		ok = utf8.Valid(b) && bytes.IndexByte(b, 0) < 0
	}
	switch {
	case ok:
		return ""
	case format == "pdf":
		return invalidPDFMessage
	}
	return unparsedDocumentMessage
}

package conversetest_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime/types"

	"github.com/lambda-agent/lambda-agent/internal/testkit/conversetest"
)

// Real first bytes of each format the stand-in recognises.
var (
	pngHead, jpegHead, gifHead, webpHead = conversetest.PNGStart, conversetest.JPEGStart, conversetest.GIFStart, conversetest.WebPStart
	pdfHead, zipHead, oleHead            = conversetest.PDFStart, conversetest.ZIPStart, conversetest.OLEStart
)

func TestMediaBytesMustMatchTheirFormat(t *testing.T) {
	imageAt := func(format types.ImageFormat, data []byte) *bedrockruntime.ConverseInput {
		return &bedrockruntime.ConverseInput{ModelId: aws.String(modelID), Messages: []types.Message{user(text("look"), image(format, data))}}
	}
	docAt := func(format types.DocumentFormat, data []byte) *bedrockruntime.ConverseInput {
		return &bedrockruntime.ConverseInput{ModelId: aws.String(modelID), Messages: []types.Message{user(text("read"), doc(format, "file", data))}}
	}
	inToolResult := func(format types.ImageFormat, data []byte) *bedrockruntime.ConverseInput {
		in := validConversation()
		in.Messages[2] = user(toolResult("t1", &types.ToolResultContentBlockMemberImage{Value: imageBlock(format, data)}))
		return in
	}
	const (
		imagePath    = "messages[0].content[1].image.source.bytes: "
		documentPath = "messages[0].content[1].document.source.bytes: "
		unparsed     = documentPath + "The document source bytes could not be parsed as the specified format"
	)
	tests := []struct {
		name string
		in   *bedrockruntime.ConverseInput
		want string // "" when Bedrock takes it
	}{
		{"png", imageAt(types.ImageFormatPng, pngHead), ""},
		{"jpeg", imageAt(types.ImageFormatJpeg, jpegHead), ""},
		{"gif", imageAt(types.ImageFormatGif, gifHead), ""},
		{"gif87a", imageAt(types.ImageFormatGif, []byte("GIF87a\x01\x00")), ""},
		{"webp", imageAt(types.ImageFormatWebp, webpHead), ""},
		{"png holding jpeg", imageAt(types.ImageFormatPng, jpegHead), imagePath + "The image was specified using the image/png media type, but the image appears to be a image/jpeg image"},
		{"jpeg holding png", imageAt(types.ImageFormatJpeg, pngHead), imagePath + "The image was specified using the image/jpeg media type, but the image appears to be a image/png image"},
		{"gif holding webp", imageAt(types.ImageFormatGif, webpHead), imagePath + "The image was specified using the image/gif media type, but the image appears to be a image/webp image"},
		{"webp holding gif", imageAt(types.ImageFormatWebp, gifHead), imagePath + "The image was specified using the image/webp media type, but the image appears to be a image/gif image"},
		{"png holding garbage", imageAt(types.ImageFormatPng, []byte("not a picture")), imagePath + "Could not process image"},
		{"png cut short", imageAt(types.ImageFormatPng, pngHead[:7]), imagePath + "Could not process image"},
		{"webp holding a wav", imageAt(types.ImageFormatWebp, []byte("RIFF\x24\x00\x00\x00WAVEfmt ")), imagePath + "Could not process image"},
		{"tool result image", inToolResult(types.ImageFormatJpeg, pngHead), "messages[2].content[0].toolResult.content[0].image.source.bytes: The image was specified using the image/jpeg media type, but the image appears to be a image/png image"},
		{"pdf", docAt(types.DocumentFormatPdf, pdfHead), ""},
		{"pdf after junk", docAt(types.DocumentFormatPdf, append([]byte("\xef\xbb\xbf\r\n"), pdfHead...)), ""},
		{"docx", docAt(types.DocumentFormatDocx, zipHead), ""},
		{"xlsx", docAt(types.DocumentFormatXlsx, zipHead), ""},
		{"doc", docAt(types.DocumentFormatDoc, oleHead), ""},
		{"xls", docAt(types.DocumentFormatXls, oleHead), ""},
		{"txt", docAt(types.DocumentFormatTxt, []byte("plain text, naïve ✓")), ""},
		{"csv", docAt(types.DocumentFormatCsv, []byte("a,b\n1,2\n")), ""},
		{"html", docAt(types.DocumentFormatHtml, []byte("<p>hi</p>")), ""},
		{"md", docAt(types.DocumentFormatMd, []byte("# Title\n")), ""},
		{"pdf holding png", docAt(types.DocumentFormatPdf, pngHead), documentPath + "The PDF specified was not valid"},
		{"pdf cut short", docAt(types.DocumentFormatPdf, []byte("%PDF")), documentPath + "The PDF specified was not valid"},
		{"docx holding doc", docAt(types.DocumentFormatDocx, oleHead), unparsed},
		{"xls holding xlsx", docAt(types.DocumentFormatXls, zipHead), unparsed},
		{"txt with a NUL", docAt(types.DocumentFormatTxt, []byte("a\x00b")), unparsed},
		{"csv in Latin-1", docAt(types.DocumentFormatCsv, []byte("caf\xe9,1\n")), unparsed},
		{"md holding pdf", docAt(types.DocumentFormatMd, pdfHead), unparsed},
	}
	srv := newServer(t)
	client := srv.Client()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv.Reset()
			srv.Enqueue(conversetest.Text("seen"))
			_, err := client.Converse(t.Context(), tt.in)
			if tt.want == "" {
				if err != nil || srv.Pending() != 0 {
					t.Fatalf("Converse: %v, %d replies left; want the request accepted", err, srv.Pending())
				}
				return
			}
			var ve *types.ValidationException
			if !errors.As(err, &ve) || ve.ErrorMessage() != tt.want {
				t.Fatalf("Converse error = %v, want ValidationException %q", err, tt.want)
			}
			if v := srv.Violations(); len(v) != 1 || v[0] != tt.want || srv.Pending() != 1 {
				t.Errorf("violations %q, %d replies left; want the refusal recorded and the reply kept", v, srv.Pending())
			}
		})
	}
}

func TestUnreadableImageIsAScriptedRefusal(t *testing.T) {
	srv := newServer(t)
	srv.Enqueue(conversetest.UnreadableImage())
	_, err := srv.Client().Converse(t.Context(), &bedrockruntime.ConverseInput{
		ModelId:  aws.String(modelID),
		Messages: []types.Message{user(text("look"), image(types.ImageFormatPng, pngHead))},
	})
	var ve *types.ValidationException
	if !errors.As(err, &ve) || !strings.Contains(ve.ErrorMessage(), "Could not process image") {
		t.Fatalf("Converse error = %v, want the ValidationException for an unreadable image", err)
	}
	if v := srv.Violations(); len(v) != 0 {
		t.Errorf("a scripted refusal was recorded as a violation: %q", v)
	}
}

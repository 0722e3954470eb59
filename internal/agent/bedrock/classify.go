package bedrock

import (
	"errors"
	"strings"

	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
	"github.com/lambda-agent/lambda-agent/internal/agent"
)

// overflowMessages are the texts of the ValidationExceptions with which Bedrock
// and the models behind it report a request larger than the context window.
var overflowMessages = []string{
	"Input is too long for requested model",
	"input length and `max_tokens` exceed context limit",
	"too many total text bytes",
	"prompt is too long",
}

// toolChoiceMessages mark a ValidationException about forcing a tool on a
// model that only accepts "auto".
var toolChoiceMessages = []string{"toolChoice", "tool_choice", "tool choice"}

// contentMessages mark a ValidationException about an image or a document in
// the request. Bedrock passes on the model's own words after "The model
// returned the following errors:", often behind the block's path, such as
// "messages.0.content.1.image.source.bytes:". They are matched ignoring
// case.
var contentMessages = []string{
	// Claude: "The image was specified using the image/jpeg media type, but
	// the image appears to be a image/png image".
	"but the image appears to be",
	// Llama: "The provided image does not match the specified image format."
	"does not match the specified image format",
	// Claude, for an image it cannot decode.
	"could not process image",
	// Claude, for a PDF it cannot read.
	"the pdf specified was not valid",
	// Claude: "The document source bytes could not be parsed as the
	// specified format."
	"source bytes could not be parsed",
	// A model that takes no images: "This model doesn't support the image
	// field for user messages."
	"doesn't support the image field",
	// The path of an image's or a document's bytes.
	"image.source", "source.bytes",
}

// modelIDMessages mark a ValidationException about the model id itself: one
// Bedrock does not know ("The provided model identifier is invalid."), or a
// model that must be called through an inference profile ("Invocation of
// model ID ... with on-demand throughput isn't supported.").
var modelIDMessages = []string{"model identifier is invalid", "with on-demand throughput"}

// classify maps an SDK error of a call to model to a *agent.ModelError. It
// is the only place that looks at Bedrock's error codes and texts.
func classify(model string, err error) *agent.ModelError {
	me := &agent.ModelError{Kind: agent.KindOther, Model: model, Message: err.Error(), Err: err}
	var re *awshttp.ResponseError
	if errors.As(err, &re) {
		me.Status = re.HTTPStatusCode()
	}
	var api smithy.APIError
	if !errors.As(err, &api) {
		var send *smithyhttp.RequestSendError
		if errors.As(err, &send) {
			me.Kind = agent.KindUnavailable // the request never reached Bedrock or its answer was lost
		}
		return me
	}
	me.Code, me.Message = api.ErrorCode(), api.ErrorMessage()
	switch me.Code {
	case "ThrottlingException":
		me.Kind = agent.KindThrottled
	case "ModelNotReadyException", "ServiceUnavailableException", "InternalServerException", "ModelTimeoutException",
		"ModelStreamErrorException": // a stream that broke off: "retry your request"
		me.Kind = agent.KindUnavailable
	case "ValidationException":
		switch {
		case containsAny(me.Message, overflowMessages):
			me.Kind = agent.KindOverflow
		case containsAny(strings.ToLower(me.Message), contentMessages):
			me.Kind = agent.KindInvalidContent
		case containsAny(me.Message, toolChoiceMessages):
			me.Kind = agent.KindToolChoiceUnsupported
		case containsAny(me.Message, modelIDMessages):
			me.Kind = agent.KindNotFound
		default:
			me.Kind = agent.KindInvalid
		}
	case "AccessDeniedException":
		me.Kind = agent.KindDenied
	case "ResourceNotFoundException":
		me.Kind = agent.KindNotFound
	default:
		switch {
		case me.Status == 429:
			me.Kind = agent.KindThrottled
		case me.Status >= 500:
			me.Kind = agent.KindUnavailable
		}
	}
	return me
}

func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

package agentcoretest

import (
	"fmt"
	"net/http"

	"github.com/lambda-agent/lambda-agent/internal/testkit/awstest"
)

// The memory operations' errors, as the SDK's model declares them: every
// shape spells its message "message", and restJson1 carries the code in
// X-Amzn-Errortype.

// validation is a 400 ValidationException with the reason the model
// names (FieldValidationFailed, CannotParse, IdempotentParameterMismatchException).
func validation(reason, format string, args ...any) *awstest.Error {
	return &awstest.Error{Status: http.StatusBadRequest, Code: "ValidationException",
		MessageKey: "message", Message: fmt.Sprintf(format, args...), Fields: map[string]string{"reason": reason}}
}

// invalidField is a ValidationException for a member that breaks its
// constraints.
func invalidField(format string, args ...any) *awstest.Error {
	return validation("FieldValidationFailed", format, args...)
}

func notFound(format string, args ...any) *awstest.Error {
	return &awstest.Error{Status: http.StatusNotFound, Code: "ResourceNotFoundException",
		MessageKey: "message", Message: fmt.Sprintf(format, args...)}
}

// Fault is an error [Server.FailNext] answers in place of an operation.
type Fault int

const (
	// Throttled is 429 ThrottledException, the error the memory
	// operations declare for request rate limiting.
	Throttled Fault = iota + 1
	// Throttling is 429 ThrottlingException, the service-wide throttling
	// error of the same model.
	Throttling
	// Unavailable is 503 ServiceUnavailableException.
	Unavailable
	// Internal is 500 ServiceException, the memory operations' server
	// fault.
	Internal
)

func (f Fault) error() *awstest.Error {
	switch f {
	case Throttled:
		return &awstest.Error{Status: http.StatusTooManyRequests, Code: "ThrottledException", MessageKey: "message", Message: "Rate exceeded"}
	case Throttling:
		return &awstest.Error{Status: http.StatusTooManyRequests, Code: "ThrottlingException", MessageKey: "message", Message: "Rate exceeded"}
	case Unavailable:
		return &awstest.Error{Status: http.StatusServiceUnavailable, Code: "ServiceUnavailableException", MessageKey: "message", Message: "Service unavailable"}
	case Internal:
		return &awstest.Error{Status: http.StatusInternalServerError, Code: "ServiceException", MessageKey: "message", Message: "Internal service error"}
	default:
		panic(fmt.Sprintf("agentcoretest: unknown fault %d", f))
	}
}

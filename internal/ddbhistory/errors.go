package ddbhistory

import (
	"errors"
	"fmt"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"
	"github.com/aws/smithy-go"
)

// Errors the store returns. Test for them with errors.Is; other DynamoDB
// errors are wrapped as they are.
var (
	// ErrNotFound is a session that does not exist, has expired, or belongs
	// to another owner.
	ErrNotFound = errors.New("session not found")
	// ErrIDTaken comes with ErrNotFound from Load when the session id is
	// another owner's: the caller may not start a session under it.
	ErrIDTaken = errors.New("the session id belongs to another owner")
	// ErrConflict is a commit that lost a race: another commit changed the
	// session after it was loaded. Nothing was written; load and try again.
	ErrConflict = errors.New("session changed concurrently")
	// ErrThrottled is DynamoDB throttling every attempt the SDK made.
	ErrThrottled = errors.New("throttled by DynamoDB")
	// ErrTooLarge is content that does not fit; the error is a *TooLargeError.
	ErrTooLarge = errors.New("too large to store")
	// ErrInvalid is an argument the store cannot accept, such as a malformed
	// session id or cursor.
	ErrInvalid = errors.New("invalid argument")
	// ErrMisconfigured is a table that does not exist, or that the store's
	// credentials may not use: a setting of the deployment is wrong, and no
	// retry helps. The error is a *TableError.
	ErrMisconfigured = errors.New("the session table cannot be used")
)

// TableError is a table the store cannot use. It matches ErrMisconfigured.
type TableError struct {
	Table string
	// Missing is true when the table does not exist, false when access to
	// it was denied.
	Missing bool
	Err     error
}

// Error names the table and what is wrong with it.
func (e *TableError) Error() string {
	if e.Missing {
		return fmt.Sprintf("the table %q does not exist: %v", e.Table, e.Err)
	}
	return fmt.Sprintf("access to the table %q was denied: %v", e.Table, e.Err)
}

// Unwrap returns DynamoDB's error.
func (e *TableError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrMisconfigured) true.
func (e *TableError) Is(target error) bool { return target == ErrMisconfigured }

// ArgumentError is an argument the store refuses; it matches ErrInvalid, and
// Reason says what is wrong.
type ArgumentError struct{ Reason string }

// Error says what is wrong with the argument.
func (e *ArgumentError) Error() string { return ErrInvalid.Error() + ": " + e.Reason }

// Is makes errors.Is(err, ErrInvalid) true.
func (e *ArgumentError) Is(target error) bool { return target == ErrInvalid }

// invalidArgument returns an *ArgumentError with a formatted reason.
func invalidArgument(format string, args ...any) error {
	return &ArgumentError{Reason: fmt.Sprintf(format, args...)}
}

// TooLargeError says what did not fit and by how much. Nothing was written.
type TooLargeError struct {
	What  string
	Size  int
	Limit int
	// Items is true when Size and Limit count items rather than bytes.
	Items bool
}

// Error says what did not fit, and the limit.
func (e *TooLargeError) Error() string {
	unit := "bytes"
	if e.Items {
		unit = "items"
	}
	return fmt.Sprintf("%s is %d %s; the limit is %d", e.What, e.Size, unit, e.Limit)
}

// Is makes errors.Is(err, ErrTooLarge) true.
func (e *TooLargeError) Is(target error) bool { return target == ErrTooLarge }

// failedAt reports whether err is a transaction cancelled because of its
// item at index.
func failedAt(err error, index int) bool {
	var canceled *types.TransactionCanceledException
	if !errors.As(err, &canceled) || index >= len(canceled.CancellationReasons) {
		return false
	}
	return aws.ToString(canceled.CancellationReasons[index].Code) == "ConditionalCheckFailed"
}

// classify maps a DynamoDB error to the store's errors. It is the only place
// that looks at DynamoDB's error codes.
func (s *Store) classify(err error) error { return Classify(s.cfg.Table, err) }

// Classify maps DynamoDB's error err, from a request on table, to the
// store's errors, as the store does its own: for the other users of the
// sessions table, such as internal/memory.
func Classify(table string, err error) error {
	var canceled *types.TransactionCanceledException
	if errors.As(err, &canceled) {
		for _, r := range canceled.CancellationReasons {
			switch aws.ToString(r.Code) {
			case "ConditionalCheckFailed", "TransactionConflict":
				return fmt.Errorf("%w: %s", ErrConflict, canceled.ErrorMessage())
			case "ThrottlingError", "ProvisionedThroughputExceeded", "RequestLimitExceeded":
				return fmt.Errorf("%w: %s", ErrThrottled, canceled.ErrorMessage())
			}
		}
		return err
	}
	var api smithy.APIError
	if !errors.As(err, &api) {
		return err
	}
	switch api.ErrorCode() {
	case "ConditionalCheckFailedException", "TransactionConflictException", "TransactionInProgressException":
		return fmt.Errorf("%w: %w", ErrConflict, err)
	case "ThrottlingException", "ProvisionedThroughputExceededException", "RequestLimitExceeded":
		return fmt.Errorf("%w: %w", ErrThrottled, err)
	case "ResourceNotFoundException":
		return &TableError{Table: table, Missing: true, Err: err}
	case "AccessDeniedException", "UnrecognizedClientException":
		return &TableError{Table: table, Err: err}
	}
	return err
}

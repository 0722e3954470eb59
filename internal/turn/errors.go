package turn

import "github.com/lambda-agent/lambda-agent/internal/ddbhistory"

// The store's failures, as the callers of the service tell them apart
// with errors.Is and errors.As. They are the store's own (ddbhistory),
// under the service's names, so that a transport names the service alone.
var (
	// ErrNotFound is a session that does not exist, or is another
	// owner's.
	ErrNotFound = ddbhistory.ErrNotFound
	// ErrConflict is a turn that another, on the same session, finished
	// before: nothing was written.
	ErrConflict = ddbhistory.ErrConflict
	// ErrDeleting is a session that is being deleted.
	ErrDeleting = ddbhistory.ErrDeleting
	// ErrDeleteUnfinished is a delete that hid the session but did not
	// remove all of it; deleting it again finishes it.
	ErrDeleteUnfinished = ddbhistory.ErrDeleteUnfinished
	// ErrThrottled is the store throttling, after retries.
	ErrThrottled = ddbhistory.ErrThrottled
	// ErrOutcomeUnknown is a write whose context ended after it was sent:
	// it may or may not have landed.
	ErrOutcomeUnknown = ddbhistory.ErrOutcomeUnknown
)

type (
	// TooLargeError is a turn too large to store.
	TooLargeError = ddbhistory.TooLargeError
	// ArgumentError is an argument the store refuses, such as a malformed
	// cursor.
	ArgumentError = ddbhistory.ArgumentError
	// TableError is a session table that does not exist, or that the
	// function may not use.
	TableError = ddbhistory.TableError
)

// Bounds of the session routes, the store's.
const (
	// MaxOwnerBytes bounds an owner's identity.
	MaxOwnerBytes = ddbhistory.MaxOwnerBytes
	// MaxListSize bounds a page of a list of sessions.
	MaxListSize = ddbhistory.MaxListSize
	// MaxPageSize bounds a page of a transcript, in messages.
	MaxPageSize = ddbhistory.MaxPageSize
)

// ValidID reports whether id may name a session: 1 to 128 letters,
// digits, '.', '_', ':' or '-', starting with a letter or digit.
func ValidID(id string) bool { return ddbhistory.ValidID(id) }

// CursorAt returns the cursor of the transcript page that starts at
// message index i.
func CursorAt(i int) string { return ddbhistory.CursorAt(i) }

package remote

import (
	"errors"
	"io"
	"strings"
	"testing"
)

// TestAnswersAreBounded: an answer is read up to MaxResponseBytes, and all
// the answers read at once up to MaxInFlightBytes together; what a closed
// answer held is free again. (Other tests of the package may read small
// answers meanwhile, so the bounds are checked with a margin.)
func TestAnswersAreBounded(t *testing.T) {
	body := func(n int) *capped {
		return &capped{ReadCloser: io.NopCloser(strings.NewReader(strings.Repeat("x", n))), left: MaxResponseBytes}
	}
	read := func(c *capped) (int64, error) { return io.Copy(io.Discard, c) }

	if n, err := read(body(MaxResponseBytes)); err != nil || n != MaxResponseBytes {
		t.Errorf("an answer of exactly MaxResponseBytes: %d, %v", n, err)
	}
	if n, err := read(body(MaxResponseBytes + 1)); !errors.Is(err, ErrTooLarge) || n != MaxResponseBytes {
		t.Errorf("one byte more: %d, %v", n, err)
	}

	// An answer being read holds what it read: one of 20 MiB, read but
	// for its end, leaves room for 12 MiB.
	first := body(20<<20 + 1)
	if n, err := io.CopyN(io.Discard, first, 20<<20); err != nil || n != 20<<20 {
		t.Fatal(n, err)
	}
	n, err := read(body(20 << 20))
	if !errors.Is(err, ErrTooLarge) || n < MaxInFlightBytes-20<<20-1<<20 || n > MaxInFlightBytes-20<<20 {
		t.Errorf("an answer beside one of 20 MiB: %d, %v", n, err)
	}
	_ = first.Close()
	_ = first.Close() // twice releases once
	if held := inFlight.Load(); held > 1<<20 {
		t.Errorf("%d bytes held after every answer ended", held)
	}
	second := body(20 << 20)
	if n, err := read(second); err != nil || n != 20<<20 {
		t.Errorf("once the first is closed: %d, %v", n, err)
	}
	_ = second.Close()
}

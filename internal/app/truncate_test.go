package app

import "testing"

func TestTruncate(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"short", "short"},
		{"exactly10!", "exactly10!"},
		{"eleven byte", "eleven byt…"},
		{"123456789é", "123456789…"}, // é is two bytes: not cut in half
	} {
		if got := truncate(c.in, 10); got != c.want {
			t.Errorf("truncate(%q, 10) = %q, want %q", c.in, got, c.want)
		}
	}
}

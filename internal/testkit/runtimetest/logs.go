package runtimetest

import (
	"io"
	"strings"
	"sync"
)

const (
	// maxLogBytes bounds what [Function.Logs] keeps, so that a long
	// benchmark does not grow without limit; the oldest half goes first.
	maxLogBytes = 8 << 20
	// stderrTailBytes is how much of stderr is kept for [ExitError].
	stderrTailBytes = 8 << 10
	// stderrTailLines is how many lines of it [ExitError] shows.
	stderrTailLines = 20
)

// logBuffer collects the output of every process of a Function, in the
// order it arrives, and copies it to an optional writer.
type logBuffer struct {
	mu  sync.Mutex
	buf []byte
	out io.Writer
}

// writer returns the writer for one stream of one process; tail, if not
// nil, also keeps the end of that stream.
func (l *logBuffer) writer(tail *tail) io.Writer {
	return &streamWriter{logs: l, tail: tail}
}

// String returns everything kept so far.
func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return string(l.buf)
}

// streamWriter is the writer the process's stdout or stderr is copied to.
type streamWriter struct {
	logs *logBuffer
	tail *tail
}

// Write never fails: an error from the copy would stop os/exec's copying
// and leave the child blocked on a full pipe.
func (w *streamWriter) Write(p []byte) (int, error) {
	l := w.logs
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.buf)+len(p) > maxLogBytes {
		keep := l.buf[len(l.buf)/2:]
		l.buf = append(l.buf[:0], keep...)
	}
	l.buf = append(l.buf, p...)
	if w.tail != nil {
		w.tail.write(p)
	}
	if l.out != nil {
		_, _ = l.out.Write(p) // a broken copy must not break the function
	}
	return len(p), nil
}

// tail keeps the last bytes written to it. Its writer holds the logBuffer's
// lock; readers take its own.
type tail struct {
	mu  sync.Mutex
	buf []byte
}

func (t *tail) write(p []byte) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - stderrTailBytes; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
}

// lastLines returns up to n complete or trailing lines, without the final
// newline.
func (t *tail) lastLines(n int) string {
	t.mu.Lock()
	s := strings.TrimRight(string(t.buf), "\n")
	t.mu.Unlock()
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

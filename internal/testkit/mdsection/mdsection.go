// Package mdsection rewrites a generated section of a Markdown file: the
// lines between "<!-- NAME: begin -->" and "<!-- NAME: end -->". The bench
// command and the reliability suite keep their results in BENCHMARKS.md and
// RELIABILITY.md this way, next to prose that people write.
package mdsection

import (
	"fmt"
	"os"
	"strings"
)

// Replace puts content between the markers of the section name in the file
// at path, and keeps the markers and everything outside them.
func Replace(path, name, content string) error {
	begin, end := "<!-- "+name+": begin -->", "<!-- "+name+": end -->"
	doc, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	before, rest, ok := strings.Cut(string(doc), begin)
	_, after, ok2 := strings.Cut(rest, end)
	if !ok || !ok2 {
		return fmt.Errorf("%s has no %s … %s markers", path, begin, end)
	}
	if !strings.HasSuffix(content, "\n") {
		content += "\n"
	}
	return os.WriteFile(path, []byte(before+begin+"\n"+content+end+after), 0o644)
}

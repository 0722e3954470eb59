package testkit

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// READMESection returns the module README's section under heading, a whole
// line such as "## Deploy", up to the next "## " heading: what tests that
// hold the README's examples to the code read.
func READMESection(heading string) (string, error) {
	dir, err := moduleRoot()
	if err != nil {
		return "", err
	}
	raw, err := os.ReadFile(filepath.Join(dir, "README.md"))
	if err != nil {
		return "", err
	}
	_, section, ok := strings.Cut(string(raw), "\n"+heading+"\n")
	if !ok {
		return "", fmt.Errorf("README.md has no section %q", heading)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	return section, nil
}

// ShellWords splits a command line of the README the way sh does: at
// blanks, but not within single or double quotes, which it removes. It
// knows no escapes, which the README's commands do not need.
func ShellWords(line string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(line); i++ {
		switch c := line[i]; {
		case c == '\'' || c == '"':
			end := strings.IndexByte(line[i+1:], c)
			if end < 0 {
				return nil, fmt.Errorf("unbalanced quote: %s", line)
			}
			cur.WriteString(line[i+1 : i+1+end])
			i += end + 1
			inWord = true
		case c == ' ' || c == '\t':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}

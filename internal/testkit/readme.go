package testkit

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// DocSection returns the section of a document of the module under
// heading: file is a path from the module's root, such as "README.md" or
// "docs/api.md", and heading a whole line, such as "## Deploy". The
// section runs from the line after the heading to the next heading of the
// same level or above; lines in fenced code blocks are never headings.
// Tests that hold the docs' examples to the code read it.
func DocSection(file, heading string) (string, error) {
	raw, err := Doc(file)
	if err != nil {
		return "", err
	}
	section, ok := docSection(raw, heading)
	if !ok {
		return "", fmt.Errorf("%s has no section %q", file, heading)
	}
	return section, nil
}

// Doc returns a document of the module, whole: file is a path from the
// module's root, such as "docs/local-run.md".
func Doc(file string) (string, error) {
	dir, err := moduleRoot()
	if err != nil {
		return "", err
	}
	raw, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(file)))
	return string(raw), err
}

// docSection is DocSection on a document's text.
func docSection(text, heading string) (string, bool) {
	level := headingLevel(heading)
	var b strings.Builder
	found, fenced := false, false
	for line := range strings.Lines(text) {
		bare := strings.TrimSuffix(line, "\n")
		fence := strings.HasPrefix(strings.TrimLeft(bare, " "), "```")
		if !fenced && !fence {
			if !found && bare == heading {
				found = true
				continue
			}
			if found && headingLevel(bare) > 0 && headingLevel(bare) <= level {
				break
			}
		}
		if fence {
			fenced = !fenced
		}
		if found {
			b.WriteString(line)
		}
	}
	return strings.TrimSuffix(b.String(), "\n"), found
}

// headingLevel is the level of a Markdown heading line, such as 2 for
// "## Deploy", or 0 for a line that is not a heading.
func headingLevel(line string) int {
	n := len(line) - len(strings.TrimLeft(line, "#"))
	if n == 0 || n > 6 || !strings.HasPrefix(line[n:], " ") {
		return 0
	}
	return n
}

// ShellWords splits a command line of the docs the way sh does: at
// blanks, but not within single or double quotes, which it removes. It
// knows no escapes, which the docs' commands do not need.
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

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

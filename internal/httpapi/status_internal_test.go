package httpapi

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestStatusesAreTheDocs: every code that docs/api.md's status table names
// beside a status is answered with that status, which statusOf alone
// chooses.
func TestStatusesAreTheDocs(t *testing.T) {
	raw, err := os.ReadFile("../../docs/api.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("^\\| ([0-9]{3})((?: `[a-z_]+`,?)*)[^|]*\\|")
	code := regexp.MustCompile("`([a-z_]+)`")
	checked := 0
	for _, line := range strings.Split(string(raw), "\n") {
		m := row.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		want, _ := strconv.Atoi(m[1])
		for _, c := range code.FindAllStringSubmatch(m[2], -1) {
			checked++
			if got := statusOf(c[1]); got != want {
				t.Errorf("%s: the docs say %d, statusOf %d", c[1], want, got)
			}
		}
	}
	if checked < 10 {
		t.Errorf("only %d codes found in the status table of docs/api.md", checked)
	}
}

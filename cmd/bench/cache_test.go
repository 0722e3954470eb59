package main

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/lambda-agent/lambda-agent/internal/testkit"
)

// TestDocsCostFigures runs the bench's token cost section and holds the
// table of docs/cost.md to it: the simulation is deterministic, so the
// figures must match to the cent.
func TestDocsCostFigures(t *testing.T) {
	if testing.Short() {
		t.Skip("runs 800 turns")
	}
	var b strings.Builder
	if err := tokenCost(t.Context(), config{}, &b); err != nil {
		t.Fatal(err)
	}
	section, err := testkit.DocSection("docs/cost.md", "# Cost")
	if err != nil {
		t.Fatal(err)
	}
	bench := regexp.MustCompile(`(?m)^\| ([a-z ,-]+) \| \d+ \| \d+ \| \d+ \| \$([0-9.]+) \| (\d+)% \|$`)
	rows := bench.FindAllStringSubmatch(b.String(), -1)
	if len(rows) != 4 {
		t.Fatalf("the bench wrote %d rows:\n%s", len(rows), b.String())
	}
	for _, r := range rows {
		cost, _ := strconv.ParseFloat(r[2], 64)
		want := fmt.Sprintf("| %s | $%.2f | %s%% |", r[1], cost, r[3])
		if !strings.Contains(section, want) {
			t.Errorf("the table of docs/cost.md lacks %q", want)
		}
	}
	ratios := regexp.MustCompile(`costs \*\*([0-9.]+)×\*\* the uncached input .* and \*\*([0-9.]+)×\*\* the plain`).FindStringSubmatch(b.String())
	if ratios == nil || !strings.Contains(section, ratios[1]+"× the uncached input and "+ratios[2]+"× the plain") {
		t.Errorf("the ratios of docs/cost.md differ from the bench's %v", ratios)
	}
	if !strings.Contains(b.String(), "target ≤ 0.35: met") || !strings.Contains(b.String(), "target ≥ 70%: met") {
		t.Errorf("a target is missed:\n%s", b.String())
	}
}

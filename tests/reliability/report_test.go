package reliability_test

import (
	"fmt"
	"os"
	"runtime"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/lambda-agent/lambda-agent/internal/testkit/mdsection"
)

// result is one guarantee's outcome in a run of the suite.
type result struct {
	guarantee string
	test      string
	tried     string // runs, faults injected, inputs tried
	lost      int    // messages or turns lost, or sessions corrupted
	failed    bool
}

var (
	resultsMu sync.Mutex
	results   []result
)

// report records what a test proved. Call it at the end of the test, with
// what it tried and what was lost; a failed test is marked as such.
func report(t *testing.T, guarantee, tried string, lost int) {
	t.Helper()
	resultsMu.Lock()
	defer resultsMu.Unlock()
	results = append(results, result{guarantee: guarantee, test: t.Name(), tried: tried, lost: lost, failed: t.Failed()})
	t.Logf("%s: %s; lost %d", guarantee, tried, lost)
}

// TestMain runs the suite and, when RELIABILITY_MD names a file, writes the
// run's results into it between the markers that file holds.
func TestMain(m *testing.M) {
	code := m.Run()
	if path := os.Getenv("RELIABILITY_MD"); path != "" {
		if err := writeReport(path); err != nil {
			fmt.Fprintln(os.Stderr, "reliability report:", err)
			code = 1
		}
	}
	os.Exit(code)
}

func writeReport(path string) error {
	resultsMu.Lock()
	rs := append([]result(nil), results...)
	resultsMu.Unlock()
	sort.SliceStable(rs, func(i, j int) bool { return rs[i].test < rs[j].test })
	var b strings.Builder
	fmt.Fprintf(&b, "Last run: %s, %s/%s, %d CPUs, %s, `RELIABILITY_MD=RELIABILITY.md go test -count=1 ./tests/reliability`.\n\n",
		time.Now().UTC().Format("2006-01-02"), runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), runtime.Version())
	b.WriteString("| guarantee | test | tried | lost | result |\n|---|---|---|---|---|\n")
	for _, r := range rs {
		status := "pass"
		if r.failed {
			status = "**FAIL**"
		}
		fmt.Fprintf(&b, "| %s | `%s` | %s | %d | %s |\n", r.guarantee, r.test, r.tried, r.lost, status)
	}
	return mdsection.Replace(path, "suite results", b.String())
}

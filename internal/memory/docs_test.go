package memory_test

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/lambda-agent/lambda-agent/internal/memory"
)

// TestDocsAreTheCode: docs/memory.md shows the stream filter and the
// extraction prompt as the code has them, and the kinds, limits and
// figures that the code sets.
func TestDocsAreTheCode(t *testing.T) {
	raw, err := os.ReadFile("../../docs/memory.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(raw)
	for name, want := range map[string]string{
		"the filter":            "```json\n" + memory.StreamFilter + "\n```",
		"the extraction prompt": "```text\n" + memory.ExtractionPrompt + "\n```",
		"the record limit":      fmt.Sprintf("%d records per owner, of at most %d bytes of text and a kind of at\n  most %d bytes", memory.MaxRecords, memory.MaxTextBytes, memory.MaxKindBytes),
		"the recall budget":     fmt.Sprintf("up to %d,%03d bytes", memory.DefaultRecallBytes/1000, memory.DefaultRecallBytes%1000),
		"the export format":     fmt.Sprintf(`"format": %q`, "lambda-agent.memory/1"),
	} {
		if !strings.Contains(doc, want) {
			t.Errorf("docs/memory.md lacks %s:\n%s", name, want)
		}
	}
	for _, k := range memory.DefaultKinds {
		recalled := "when relevant"
		if k.Always {
			recalled = "every turn, as room allows"
		}
		row := fmt.Sprintf("| `%s` | %s | %s |", k.Name, strings.ToLower(strings.TrimSuffix(k.Prompt, ".")), recalled)
		if !strings.Contains(doc, row) {
			t.Errorf("docs/memory.md's kinds table lacks the row\n%s", row)
		}
	}
}

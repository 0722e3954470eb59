package mdsection

import (
	"os"
	"path/filepath"
	"testing"
)

func TestReplace(t *testing.T) {
	path := filepath.Join(t.TempDir(), "doc.md")
	doc := "# Title\n\nprose\n\n<!-- r: begin -->\nold\nrows\n<!-- r: end -->\n\nmore prose\n"
	if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	for range 2 { // the second time finds the first's markers
		if err := Replace(path, "r", "new"); err != nil {
			t.Fatal(err)
		}
	}
	got, _ := os.ReadFile(path)
	want := "# Title\n\nprose\n\n<!-- r: begin -->\nnew\n<!-- r: end -->\n\nmore prose\n"
	if string(got) != want {
		t.Errorf("file is\n%s\nwant\n%s", got, want)
	}
	if err := Replace(path, "other", "x"); err == nil {
		t.Error("no error for a section the file does not have")
	}
	if after, _ := os.ReadFile(path); string(after) != want {
		t.Error("a failed Replace changed the file")
	}
}

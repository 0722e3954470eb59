package testkit

import "testing"

func TestDocSection(t *testing.T) {
	const doc = "# Title\n\nopening\n\n## A\n\na\n\n### A1\n\na1\n\n```sh\n# a comment, not a heading\n## nor this\n```\n\n## B\n\nb\n"
	for _, tt := range []struct {
		heading, want string
		ok            bool
	}{
		{"# Title", "\nopening\n\n## A\n\na\n\n### A1\n\na1\n\n```sh\n# a comment, not a heading\n## nor this\n```\n\n## B\n\nb", true},
		{"## A", "\na\n\n### A1\n\na1\n\n```sh\n# a comment, not a heading\n## nor this\n```\n", true},
		{"### A1", "\na1\n\n```sh\n# a comment, not a heading\n## nor this\n```\n", true},
		{"## B", "\nb", true},
		{"## nor this", "", false},
		{"## C", "", false},
	} {
		t.Run(tt.heading, func(t *testing.T) {
			got, ok := docSection(doc, tt.heading)
			if got != tt.want || ok != tt.ok {
				t.Errorf("docSection(%q) = %q, %v; want %q, %v", tt.heading, got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestDocSectionReadsTheModulesFiles(t *testing.T) {
	if _, err := DocSection("README.md", "# lambda-agent"); err != nil {
		t.Error(err)
	}
	if _, err := DocSection("README.md", "## No such section"); err == nil {
		t.Error("a section the README lacks was found")
	}
}

package deploy

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"

	"github.com/google/go-cmp/cmp"
)

// docFiles returns README.md and the pages of docs/ under root.
func docFiles(t *testing.T, root string) []string {
	t.Helper()
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{filepath.Join(root, "README.md")}, pages...)
}

// TestDocLinksResolve: every relative link of README.md and docs/*.md
// names a file that exists, and its #anchor a heading of that file, as
// GitHub makes anchors of headings; and the README links to every page.
func TestDocLinksResolve(t *testing.T) {
	root := filepath.Join("..", "..")
	linked := map[string]bool{}
	n := 0
	for _, file := range docFiles(t, root) {
		links, broken, err := checkLinks(file)
		if err != nil {
			t.Fatal(err)
		}
		n += len(links)
		for _, b := range broken {
			t.Errorf("%s: %s", file, b)
		}
		if filepath.Base(file) == "README.md" {
			for _, l := range links {
				path, _, _ := strings.Cut(l, "#")
				linked[filepath.Clean(path)] = true
			}
		}
	}
	if n == 0 {
		t.Fatal("no links found in the docs")
	}
	for _, page := range docFiles(t, root)[1:] {
		if rel := filepath.Join("docs", filepath.Base(page)); !linked[rel] {
			t.Errorf("README.md does not link to %s", rel)
		}
	}
}

// TestCheckLinksFindsBrokenLinks: the check reports a missing file, a
// missing heading of this file or another, and a heading inside a code
// block, and nothing else.
func TestCheckLinksFindsBrokenLinks(t *testing.T) {
	root := t.TempDir()
	write := func(name, text string) {
		t.Helper()
		path := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("README.md", "# Title\n\nSee [the API](docs/api.md), [chat](docs/api.md#post-chat),\n[a\npicture](docs/chat.png), [here](#title), [the web](https://example.com/x#y)\nand `[code](nowhere.md)`.\n\n"+
		"Broken: [gone](docs/gone.md), [no heading](docs/api.md#post-chats), [not here](#api), [fenced](docs/api.md#fenced).\n\n```md\n[in a code block](nowhere.md)\n```\n")
	write("docs/api.md", "# API\n\n## `POST /chat`\n\n## Status codes\n\n[Back](../README.md#title), [up](../README.md#titles), [codes](#status-codes).\n\n```sh\n# fenced\n```\n")
	write("docs/chat.png", "")

	var got []string
	for _, file := range docFiles(t, root) {
		_, broken, err := checkLinks(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range broken {
			got = append(got, filepath.Base(file)+": "+b)
		}
	}
	want := []string{
		"README.md: docs/gone.md: no such file",
		"README.md: docs/api.md#post-chats: no such heading",
		"README.md: #api: no such heading",
		"README.md: docs/api.md#fenced: no such heading",
		"api.md: ../README.md#titles: no such heading",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("broken links (-want +got):\n%s", diff)
	}
}

func TestAnchor(t *testing.T) {
	for heading, want := range map[string]string{
		"How a turn flows":                                 "how-a-turn-flows",
		"`POST /chat`":                                     "post-chat",
		"`GET /sessions/{sessionId}`":                      "get-sessionssessionid",
		"Streaming: `POST /chat` as Server-Sent Events":    "streaming-post-chat-as-server-sent-events",
		"Remote tools: MCP servers and Lambda functions":   "remote-tools-mcp-servers-and-lambda-functions",
		"`sam local invoke`":                               "sam-local-invoke",
		"Rewind, edit and regenerate":                      "rewind-edit-and-regenerate",
		"snake_case and a-hyphen":                          "snake_case-and-a-hyphen",
		"`GET /sessions/{sessionId}/export` and `POST /x`": "get-sessionssessionidexport-and-post-x",
	} {
		if got := anchor(heading); got != want {
			t.Errorf("anchor(%q) = %q, want %q", heading, got, want)
		}
	}
}

// mdLink is an inline link or image of Markdown; its text may span lines.
var mdLink = regexp.MustCompile(`\[[^\]]*\]\(([^()\s]*)(?:\s+"[^"]*")?\)`)

// inlineCode is a code span, which holds no links.
var inlineCode = regexp.MustCompile("`[^`]*`")

// checkLinks returns the relative links of the Markdown file, and those
// that are broken: a file that does not exist, or an anchor that is not a
// heading of the file it names. Links to other sites are not followed.
func checkLinks(file string) (links, broken []string, err error) {
	raw, err := os.ReadFile(file)
	if err != nil {
		return nil, nil, err
	}
	prose, _ := splitMarkdown(string(raw))
	for paragraph := range strings.SplitSeq(prose, "\n\n") {
		for _, m := range mdLink.FindAllStringSubmatch(inlineCode.ReplaceAllString(paragraph, ""), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			links = append(links, target)
			path, frag, _ := strings.Cut(target, "#")
			dest := file
			if path != "" {
				dest = filepath.Join(filepath.Dir(file), filepath.FromSlash(path))
			}
			if _, err := os.Stat(dest); err != nil {
				broken = append(broken, target+": no such file")
				continue
			}
			if frag == "" {
				continue
			}
			anchors, err := headingAnchors(dest)
			if err != nil {
				return nil, nil, err
			}
			if !slices.Contains(anchors, frag) {
				broken = append(broken, target+": no such heading")
			}
		}
	}
	return links, broken, nil
}

// headingAnchors returns the anchors GitHub gives the headings of a
// Markdown file: a second heading of the same text gets "-1", a third "-2".
func headingAnchors(file string) ([]string, error) {
	if filepath.Ext(file) != ".md" {
		return nil, fmt.Errorf("%s is not Markdown: its anchors are unknown", file)
	}
	raw, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	_, headings := splitMarkdown(string(raw))
	seen := map[string]int{}
	var anchors []string
	for _, h := range headings {
		a := anchor(h)
		if n := seen[a]; n > 0 {
			anchors = append(anchors, fmt.Sprintf("%s-%d", a, n))
		} else {
			anchors = append(anchors, a)
		}
		seen[a]++
	}
	return anchors, nil
}

// splitMarkdown returns a Markdown text without its fenced code blocks,
// and the text of its headings, in order.
func splitMarkdown(text string) (prose string, headings []string) {
	var b strings.Builder
	fenced := false
	for line := range strings.Lines(text) {
		if strings.HasPrefix(strings.TrimLeft(line, " "), "```") {
			fenced = !fenced
			b.WriteString("\n")
			continue
		}
		if fenced {
			b.WriteString("\n")
			continue
		}
		b.WriteString(line)
		if level := len(line) - len(strings.TrimLeft(line, "#")); level > 0 && level <= 6 && strings.HasPrefix(line[level:], " ") {
			headings = append(headings, strings.TrimSpace(line[level:]))
		}
	}
	return b.String(), headings
}

// anchor is the anchor GitHub gives a heading: lower case, spaces made
// hyphens, and every character but letters, digits, hyphens and
// underscores dropped.
func anchor(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_':
			b.WriteRune(r)
		case r == ' ':
			b.WriteByte('-')
		}
	}
	return b.String()
}

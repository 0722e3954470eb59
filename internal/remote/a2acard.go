package remote

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/a2aproject/a2a-go/v2/a2a"
)

// The bounds on what an agent's card may bring.
const (
	// MaxA2ACardBytes bounds a card: a larger one is refused, not cut.
	MaxA2ACardBytes = 64 << 10
	// MaxA2ADescriptionBytes bounds what a card says of its agent and its
	// skills in the tool's description.
	MaxA2ADescriptionBytes = 1024
)

// fetchCard gets the card at cardURL, with client, whose transport guards
// the request and adds the agent's headers.
func fetchCard(ctx context.Context, client *http.Client, cardURL string) (*a2a.AgentCard, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, cardURL, nil)
	if err != nil {
		return nil, fmt.Errorf("card: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("card: %w", err)
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("card: %s answered %s", cardURL, resp.Status)
	}
	raw, err := io.ReadAll(io.LimitReader(resp.Body, MaxA2ACardBytes+1))
	if err != nil {
		return nil, fmt.Errorf("card: %w", err)
	}
	if len(raw) > MaxA2ACardBytes {
		return nil, fmt.Errorf("card: larger than %d KiB", MaxA2ACardBytes>>10)
	}
	if t := bytes.TrimSpace(raw); len(t) == 0 || t[0] != '{' {
		return nil, errors.New("card: not a JSON object")
	}
	var card a2a.AgentCard
	if err := json.Unmarshal(raw, &card); err != nil {
		return nil, fmt.Errorf("card: not an A2A agent card: %w", err)
	}
	return &card, nil
}

// pickInterface returns the card's first JSON-RPC interface of A2A 1.x
// that is safe to call: on the card URL's origin, and https unless the
// card URL is plain http to a loopback address. Without one, it says why
// the first JSON-RPC interface is not.
func pickInterface(card *a2a.AgentCard, cardURL *url.URL) (*a2a.AgentInterface, error) {
	var first error
	for _, iface := range card.SupportedInterfaces {
		if iface == nil || iface.ProtocolBinding != a2a.TransportProtocolJSONRPC {
			continue
		}
		err := checkInterface(iface, cardURL)
		if err == nil {
			return iface, nil
		}
		if first == nil {
			first = err
		}
	}
	if first == nil {
		return nil, errors.New("the card offers no JSON-RPC interface")
	}
	return nil, first
}

func checkInterface(iface *a2a.AgentInterface, cardURL *url.URL) error {
	if v := strings.TrimPrefix(string(iface.ProtocolVersion), "v"); v != "1" && !strings.HasPrefix(v, "1.") {
		return fmt.Errorf("its JSON-RPC interface speaks A2A %q, not 1.x", cut(v, 32))
	}
	u, err := url.Parse(iface.URL)
	switch {
	case err != nil || !u.IsAbs() || u.Host == "":
		return fmt.Errorf("its interface URL %q is not an absolute URL", cut(iface.URL, 200))
	case u.User != nil:
		return fmt.Errorf("its interface URL %q holds credentials", cut(iface.URL, 200))
	case u.Scheme != "https" && !(u.Scheme == "http" && cardURL.Scheme == "http"):
		return fmt.Errorf("its interface URL %q is not https", cut(iface.URL, 200))
	case originOf(u) != originOf(cardURL):
		return fmt.Errorf("its interface URL %q is on another origin than the card's, %s: %w", cut(iface.URL, 200), originOf(cardURL), ErrOtherOrigin)
	}
	return nil
}

// describe is the tool's description: the configured one, or what the
// card says of the agent and its skills, cleaned and cut, after a line of
// ours.
func describe(cfg A2AAgent, card *a2a.AgentCard) string {
	if cfg.Description != "" {
		return cfg.Description
	}
	var b strings.Builder
	if name := clean(card.Name); name != "" {
		b.WriteString(name)
		b.WriteString(": ")
	}
	b.WriteString(clean(card.Description))
	for i, s := range card.Skills {
		if i == 0 {
			b.WriteString(" Skills:")
		}
		fmt.Fprintf(&b, " %s: %s;", clean(s.Name), clean(s.Description))
	}
	said := cut(strings.TrimSpace(b.String()), MaxA2ADescriptionBytes)
	head := fmt.Sprintf("Sends a message to the remote agent %s and returns its answer.", cfg.Name)
	if said == "" {
		return head
	}
	return head + " The agent describes itself so: " + said
}

// clean makes one line of s: each run of control, format (such as
// bidirectional overrides) and space characters becomes one space.
func clean(s string) string {
	var b strings.Builder
	space := false
	for _, r := range s {
		if unicode.IsControl(r) || unicode.Is(unicode.Cf, r) || unicode.IsSpace(r) || r == utf8.RuneError {
			space = true
			continue
		}
		if space && b.Len() > 0 {
			b.WriteByte(' ')
		}
		space = false
		b.WriteRune(r)
	}
	return b.String()
}

// cut returns s whole, or its start and "…", n bytes at most, cut on a
// character's boundary.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := max(n-len("…"), 0)
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + "…"
}

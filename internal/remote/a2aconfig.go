package remote

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/lambda-agent/lambda-agent/internal/agent"
)

// A2AAgent is an entry of A2A_AGENTS: a remote agent, reached over the
// Agent2Agent protocol (v1.0, JSON-RPC), that the agent may ask as a tool.
type A2AAgent struct {
	// Name is the tool's name for the model.
	Name string `json:"name"`
	// CardURL is where the agent's card is, such as
	// https://host/.well-known/agent-card.json: https, or http to a
	// literal loopback address. Requests go to its origin alone, whatever
	// the card says.
	CardURL string `json:"card_url"`
	// Description, when set, is the tool's description, instead of one
	// made from the card's.
	Description string `json:"description,omitempty"`
	// Headers are sent with every request to the agent, as they are.
	Headers map[string]string `json:"headers,omitempty"`
	// SecretHeaders are sent with every request too, each the value of the
	// SSM parameter it names, read once at init (ResolveA2ASecrets).
	SecretHeaders map[string]string `json:"secret_headers,omitempty"`
	// Auth is how requests are authorized beside the headers: "" for no
	// more, or A2AAuthIAM.
	Auth string `json:"auth,omitempty"`
	// Agents, when set, are the sub-agents offered the tool, by name,
	// instead of the main agent.
	Agents []string `json:"agents,omitempty"`
	// TimeoutSeconds bounds one message to the agent, its answer
	// included; 0 means DefaultA2ATimeout, and at most MaxA2ATimeout.
	TimeoutSeconds int `json:"timeout_seconds,omitempty"`
}

// A2AAuthIAM signs every request to the agent, the card's included, with
// AWS Signature Version 4 for the service lambda: what a Lambda function
// URL whose auth type is AWS_IAM expects.
const A2AAuthIAM = "aws_iam"

// The bounds of A2AAgent.TimeoutSeconds.
const (
	DefaultA2ATimeout = time.Minute
	MaxA2ATimeout     = 15 * time.Minute // Lambda's longest invocation
)

// Timeout is how long one message to the agent may take.
func (a A2AAgent) Timeout() time.Duration {
	if a.TimeoutSeconds == 0 {
		return DefaultA2ATimeout
	}
	return time.Duration(a.TimeoutSeconds) * time.Second
}

// ParseA2AAgents reads A2A_AGENTS: a JSON list of A2AAgent, checked. It
// reports every problem at once.
func ParseA2AAgents(v string) ([]A2AAgent, error) {
	var agents []A2AAgent
	if err := DecodeStrict(v, &agents); err != nil {
		return nil, err
	}
	var errs []error
	names := map[string]bool{}
	for i, a := range agents {
		fail := func(format string, args ...any) {
			errs = append(errs, fmt.Errorf("[%d] %s: %s", i, a.Name, fmt.Sprintf(format, args...)))
		}
		switch {
		case !agent.ValidToolName(a.Name):
			fail("name must match %s", agent.ToolNameRule)
		case names[a.Name]:
			fail("a second agent has this name")
		}
		names[a.Name] = true
		if _, err := parseCardURL(a.CardURL); err != nil {
			fail("card_url: %v", err)
		}
		checkHeaders(a.Headers, a.SecretHeaders, fail)
		switch a.Auth {
		case "":
		case A2AAuthIAM:
			for k := range a.Headers {
				if strings.EqualFold(k, "Authorization") {
					fail("auth %s signs the Authorization header: it cannot be set too", A2AAuthIAM)
				}
			}
			for k := range a.SecretHeaders {
				if strings.EqualFold(k, "Authorization") {
					fail("auth %s signs the Authorization header: it cannot be set from a secret too", A2AAuthIAM)
				}
			}
		default:
			fail("auth must be empty or %q", A2AAuthIAM)
		}
		for _, sub := range a.Agents {
			if strings.TrimSpace(sub) == "" {
				fail("agents holds an empty name")
			}
		}
		if a.TimeoutSeconds < 0 || time.Duration(a.TimeoutSeconds)*time.Second > MaxA2ATimeout {
			fail("timeout_seconds must be between 1 and %d", int(MaxA2ATimeout.Seconds()))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return agents, nil
}

// parseCardURL checks an agent's card URL: absolute, https or http to a
// loopback address (checkURL), without credentials in it, and not to a
// literal address that no agent may be reached at.
func parseCardURL(raw string) (*url.URL, error) {
	if err := checkURL(raw); err != nil {
		return nil, err
	}
	u, _ := url.Parse(raw) // checkURL parsed it
	if u.User != nil {
		return nil, fmt.Errorf("%q: put credentials in headers, not in the URL", raw)
	}
	if ip, err := netip.ParseAddr(u.Hostname()); err == nil && !ip.Unmap().IsLoopback() {
		if why := forbiddenAddr(ip); why != "" {
			return nil, fmt.Errorf("%q: %s, %w", raw, why, ErrForbiddenAddress)
		}
	}
	return u, nil
}

// origin is a URL's scheme, host and port, the port made explicit, as
// browsers compare them.
type origin struct{ scheme, host, port string }

func originOf(u *url.URL) origin {
	port := u.Port()
	if port == "" {
		switch u.Scheme {
		case "https":
			port = "443"
		case "http":
			port = "80"
		}
	}
	return origin{scheme: strings.ToLower(u.Scheme), host: strings.ToLower(u.Hostname()), port: port}
}

func (o origin) String() string {
	return o.scheme + "://" + net.JoinHostPort(o.host, o.port)
}

// loopbackHost reports whether host is literally a loopback address, or
// localhost: the one kind of card URL whose agent may be reached on a
// loopback address.
func loopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.Unmap().IsLoopback()
}

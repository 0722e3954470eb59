package remote

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"strings"

	"github.com/lambda-agent/lambda-agent/internal/agent"
)

// MCPServer is an entry of MCP_SERVERS: an MCP server whose tools the agent
// may use.
type MCPServer struct {
	// Name names the server in logs, and prefixes its tools by default.
	Name string `json:"name"`
	// URL is the server's streamable HTTP endpoint: https, or http to a
	// loopback address.
	URL string `json:"url"`
	// Headers are sent with every request, as they are.
	Headers map[string]string `json:"headers,omitempty"`
	// SecretHeaders are sent with every request too, each the value of the
	// SSM parameter it names (a SecureString, say), read once at init.
	SecretHeaders map[string]string `json:"secret_headers,omitempty"`
	// Allow, when set, lists the server's tools the agent may use, by the
	// server's names for them; the others are left out.
	Allow []string `json:"allow,omitempty"`
	// Prefix goes before the server's tool names; nil means Name and "_".
	Prefix *string `json:"prefix,omitempty"`
	// Agents, when set, are the sub-agents offered the server's tools,
	// by name, instead of the main agent.
	Agents []string `json:"agents,omitempty"`
}

// ToolPrefix is the prefix of the server's tool names.
func (s MCPServer) ToolPrefix() string {
	if s.Prefix != nil {
		return *s.Prefix
	}
	return s.Name + "_"
}

// LambdaTool is an entry of LAMBDA_TOOLS: a Lambda function the agent may
// call as a tool.
type LambdaTool struct {
	// Name is the tool's name for the model.
	Name string `json:"name"`
	// Function is the function's name or ARN, with a qualifier if any.
	Function    string `json:"function"`
	Description string `json:"description"`
	// InputSchema is the JSON Schema of the tool's input, whose root is an
	// object; absent, any object.
	InputSchema json.RawMessage `json:"input_schema,omitempty"`
	// Agents, when set, are the sub-agents offered the tool, by name,
	// instead of the main agent.
	Agents []string `json:"agents,omitempty"`
}

var (
	serverNamePattern = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,32}$`)
	headerNamePattern = regexp.MustCompile("^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")
)

// anyObject is a Lambda tool's input schema when the configuration gives
// none.
var anyObject = json.RawMessage(`{"type":"object"}`)

// ParseMCPServers reads MCP_SERVERS: a JSON list of MCPServer, checked. It
// reports every problem at once.
func ParseMCPServers(v string) ([]MCPServer, error) {
	var servers []MCPServer
	if err := DecodeStrict(v, &servers); err != nil {
		return nil, err
	}
	var errs []error
	names := map[string]bool{}
	for i, s := range servers {
		fail := func(format string, args ...any) {
			errs = append(errs, fmt.Errorf("[%d] %s: %s", i, s.Name, fmt.Sprintf(format, args...)))
		}
		switch {
		case !serverNamePattern.MatchString(s.Name):
			fail("name must match %s", serverNamePattern)
		case names[s.Name]:
			fail("a second server has this name")
		}
		names[s.Name] = true
		if err := checkURL(s.URL); err != nil {
			fail("url: %v", err)
		}
		checkHeaders(s.Headers, s.SecretHeaders, fail)
		if p := s.ToolPrefix(); p != "" && !agent.ValidToolName(p) {
			fail("prefix %q may hold only letters, digits, _ and -", p)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return servers, nil
}

// checkHeaders reports, through fail, the headers and secret headers of
// an entry that are not valid HTTP headers, or set twice.
func checkHeaders(headers, secretHeaders map[string]string, fail func(format string, args ...any)) {
	for k, v := range headers {
		if !headerNamePattern.MatchString(k) || strings.ContainsAny(v, "\r\n") {
			fail("header %q is not a valid HTTP header", k)
		}
	}
	for k, p := range secretHeaders {
		if !headerNamePattern.MatchString(k) {
			fail("secret header %q is not a valid HTTP header name", k)
		}
		if _, dup := headers[k]; dup {
			fail("header %q is set both as is and from a secret", k)
		}
		if p == "" {
			fail("secret header %q names no SSM parameter", k)
		}
	}
}

// checkURL accepts https, and http to a loopback address, where nothing
// crosses a network.
func checkURL(raw string) error {
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return err
	case u.Host == "":
		return fmt.Errorf("%q is not an absolute URL", raw)
	case u.Scheme == "https":
		return nil
	case u.Scheme != "http":
		return fmt.Errorf("%q: the scheme must be https", raw)
	}
	host := u.Hostname()
	if ip := net.ParseIP(host); (ip != nil && ip.IsLoopback()) || host == "localhost" {
		return nil
	}
	return fmt.Errorf("%q: use https; plain http is accepted only to a loopback address", raw)
}

// ParseLambdaTools reads LAMBDA_TOOLS: a JSON list of LambdaTool, checked.
// LambdaTools compiles the input schemas.
func ParseLambdaTools(v string) ([]LambdaTool, error) {
	var tools []LambdaTool
	if err := DecodeStrict(v, &tools); err != nil {
		return nil, err
	}
	var errs []error
	names := map[string]bool{}
	for i := range tools {
		t := &tools[i]
		fail := func(format string, args ...any) {
			errs = append(errs, fmt.Errorf("[%d] %s: %s", i, t.Name, fmt.Sprintf(format, args...)))
		}
		switch {
		case !agent.ValidToolName(t.Name):
			fail("name must match %s", agent.ToolNameRule)
		case names[t.Name]:
			fail("a second tool has this name")
		}
		names[t.Name] = true
		if t.Function == "" {
			fail("function is required: the function's name or ARN")
		}
		if strings.TrimSpace(t.Description) == "" {
			fail("description is required: the model reads it to choose the tool")
		}
		if len(t.InputSchema) == 0 || string(t.InputSchema) == "null" {
			t.InputSchema = anyObject
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return tools, nil
}

// DecodeStrict decodes a JSON list, refusing unknown fields: the strict
// reading of a configuration variable that holds one, such as AGENTS.
func DecodeStrict(v string, out any) error {
	dec := json.NewDecoder(bytes.NewReader([]byte(v)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(out); err != nil {
		return fmt.Errorf("want a JSON list of objects: %w", err)
	}
	if dec.More() {
		return errors.New("unexpected data after the JSON list")
	}
	return nil
}

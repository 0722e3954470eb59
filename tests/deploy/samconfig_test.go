package deploy

import (
	"bufio"
	"os"
	"strings"
	"testing"
)

// samconfig is samconfig.toml read line by line: enough for its flat tables
// of key = value, and for string arrays written one element per line.
type samconfig struct {
	version string
	tables  map[string]map[string]string   // table -> key -> raw value
	arrays  map[string]map[string][]string // table -> key -> array elements
}

func loadSamconfig(t *testing.T) *samconfig {
	t.Helper()
	f, err := os.Open(samconfigPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	c := &samconfig{tables: map[string]map[string]string{}, arrays: map[string]map[string][]string{}}
	table, array := "", ""
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		switch {
		case line == "" || strings.HasPrefix(line, "#"):
		case array != "":
			if line == "]" {
				array = ""
				continue
			}
			c.arrays[table][array] = append(c.arrays[table][array], unquote(t, strings.TrimSuffix(line, ",")))
		case strings.HasPrefix(line, "["):
			table = strings.Trim(line, "[]")
			c.tables[table] = map[string]string{}
			c.arrays[table] = map[string][]string{}
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok {
				t.Fatalf("%s:%d: cannot read %q", samconfigPath, n, line)
			}
			k, v = strings.TrimSpace(k), strings.TrimSpace(v)
			switch {
			case table == "" && k == "version":
				c.version = v
			case table == "":
				t.Errorf("%s:%d: %s outside a table", samconfigPath, n, k)
			case v == "[":
				array = k
			default:
				c.tables[table][k] = v
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return c
}

// overrides returns the parameter_overrides of [default.<command>.parameters]
// as parameter names and values.
func (c *samconfig) overrides(t *testing.T, command string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, o := range c.arrays["default."+command+".parameters"]["parameter_overrides"] {
		name, value, ok := strings.Cut(o, "=")
		if !ok {
			t.Errorf("[default.%s.parameters] parameter_overrides: %q is not NAME=VALUE", command, o)
			continue
		}
		out[name] = value
	}
	return out
}

// overrideCommands are the samconfig commands with parameter_overrides.
var overrideCommands = []string{"deploy", "local_invoke", "local_start_api"}

func unquote(t *testing.T, s string) string {
	t.Helper()
	if len(s) < 2 || s[0] != '"' || s[len(s)-1] != '"' {
		t.Errorf("want a quoted string, got %s", s)
		return s
	}
	return s[1 : len(s)-1]
}

func TestSamconfig(t *testing.T) {
	c := loadSamconfig(t)
	if c.version != "0.1" {
		t.Errorf("version = %q, want 0.1", c.version)
	}
	if got := c.tables["default.global.parameters"]["stack_name"]; got != `"lambda-agent"` {
		t.Errorf("stack_name = %s, want \"lambda-agent\"", got)
	}
	deploy := c.tables["default.deploy.parameters"]
	for k, want := range map[string]string{
		// Plain CAPABILITY_IAM: the template names no IAM resources.
		"capabilities":      `"CAPABILITY_IAM"`,
		"resolve_s3":        "true",
		"confirm_changeset": "true",
	} {
		if got := deploy[k]; got != want {
			t.Errorf("[default.deploy.parameters] %s = %q, want %s", k, got, want)
		}
	}
}

// TestSamconfigOverrides checks the parameter overrides against the
// template, so that the example always deploys, and deploys privately.
func TestSamconfigOverrides(t *testing.T) {
	c := loadSamconfig(t)
	tp := loadTemplate(t)
	for _, command := range overrideCommands {
		t.Run(command, func(t *testing.T) {
			overrides := c.overrides(t, command)
			if len(overrides) == 0 {
				t.Fatalf("[default.%s.parameters] has no parameter_overrides array", command)
			}
			for name, value := range overrides {
				p, ok := tp.Parameters[name]
				if !ok {
					t.Errorf("parameter_overrides sets %s, which the template does not declare", name)
					continue
				}
				if !p.allowed(t, value) {
					t.Errorf("parameter_overrides: %s=%s is not an allowed value", name, value)
				}
			}
			if t.Failed() {
				return
			}
			newResolver(t, tp, overrides).deployable(t)
		})
	}
	// Open mode is a choice made on the command line, never the example's.
	if got := c.overrides(t, "deploy")["AllowAnonymous"]; got == "true" {
		t.Errorf("[default.deploy.parameters] sets AllowAnonymous=true: sam deploy would open the API to the internet")
	}
}

package deploy

import (
	"encoding/json"
	"maps"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/google/go-cmp/cmp"
	"github.com/lambda-agent/lambda-agent/internal/ddbhistory"
	"github.com/lambda-agent/lambda-agent/internal/memory"
	"github.com/lambda-agent/lambda-agent/internal/remote"
	"github.com/lambda-agent/lambda-agent/internal/testkit"
)

// docCommands returns the shell commands of the sh blocks in the section
// heading of the document file, in order, each on one line and without its
// comment.
func docCommands(t *testing.T, file, heading string) []string {
	t.Helper()
	section, err := testkit.DocSection(file, heading)
	if err != nil {
		t.Fatal(err)
	}
	var cmds []string
	for _, block := range strings.Split(section, "```sh\n")[1:] {
		block, _, _ = strings.Cut(block, "```")
		for line := range strings.Lines(strings.ReplaceAll(block, "\\\n", " ")) {
			line, _, _ = strings.Cut(line, "#")
			if line = strings.Join(strings.Fields(line), " "); line != "" {
				cmds = append(cmds, line)
			}
		}
	}
	return cmds
}

// TestDeployOverrides: the sam deploy commands of the docs name
// parameters of the template, with values the template accepts.
func TestDeployOverrides(t *testing.T) {
	tp := loadTemplate(t)
	n := 0
	commands := slices.Concat(docCommands(t, "docs/deploy.md", "# Deploy"), docCommands(t, "docs/tools.md", "## Remote tools: MCP servers and Lambda functions"),
		docCommands(t, "docs/observability.md", "# Observability"), docCommands(t, "docs/subagents.md", "# Sub-agents"),
		docCommands(t, "docs/a2a.md", "# A2A: other agents call this one, and this one calls others"),
		docCommands(t, "docs/configuration.md", "## Long-term memory"))
	for _, c := range commands {
		_, overrides, ok := strings.Cut(c, "--parameter-overrides ")
		if !ok {
			continue
		}
		words, err := testkit.ShellWords(overrides)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range words {
			name, value, _ := strings.Cut(o, "=")
			n++
			p, ok := tp.Parameters[name]
			if !ok {
				t.Errorf("%s: the template has no parameter %s", c, name)
				continue
			}
			if value = strings.Trim(value, `"`); !p.allowed(t, value) {
				t.Errorf("%s: %s does not accept %q", c, name, value)
			}
			// The JSON lists are the functions' to read.
			switch name {
			case "McpServers":
				_, err = remote.ParseMCPServers(value)
			case "LambdaTools":
				_, err = remote.ParseLambdaTools(value)
			case "A2aAgents":
				_, err = remote.ParseA2AAgents(value)
			case "MemoryKinds":
				var kinds []memory.Kind
				if err = json.Unmarshal([]byte(value), &kinds); err == nil {
					err = memory.CheckKinds(kinds)
				}
			}
			if err != nil {
				t.Errorf("%s: %s: %v", c, name, err)
			}
		}
	}
	if n == 0 {
		t.Error("the docs' sam deploy commands override no parameter")
	}
}

// TestSamLocalInvoke holds the sam local sequence of docs/sam-local.md to
// the files it uses: the functions are the template's, the events exist,
// samconfig gives sam local the environment file and the Docker network
// that the commands set up, the environment file sets only what the
// template declares (sam local ignores the rest), and the table the
// commands create is the store's.
// functions.TestSamLocalInvokeAsWritten runs the same sequence.
func TestSamLocalInvoke(t *testing.T) {
	tp := loadTemplate(t)
	sc := loadSamconfig(t)
	var network, container, port, tableFile string
	invoked := 0
	for _, c := range docCommands(t, "docs/sam-local.md", "# `sam local invoke`") {
		f := strings.Fields(c)
		switch {
		case strings.HasPrefix(c, "docker network create "):
			network = f[3]
		case strings.HasPrefix(c, "docker run "):
			container, port = flag(f, "--name"), strings.Split(flag(f, "-p"), ":")[1]
			if got := flag(f, "--network"); got != network {
				t.Errorf("DynamoDB Local runs on the network %q, not the one created, %q", got, network)
			}
			if !slices.Contains(f, "-sharedDb") {
				t.Errorf("DynamoDB Local without -sharedDb keeps one database per access key and Region: %s", c)
			}
		case strings.HasPrefix(c, "aws dynamodb create-table "):
			tableFile = strings.TrimPrefix(flag(f, "--cli-input-json"), "file://")
		case c == "sam build":
		case strings.HasPrefix(c, "sam local invoke "):
			invoked++
			if fn := f[3]; tp.Resources[fn].Type != "AWS::Serverless::Function" {
				t.Errorf("%s: %s is not a function of the template", c, fn)
			}
			if _, err := os.Stat(filepath.Join("..", "..", flag(f, "-e"))); err != nil {
				t.Errorf("%s: %v", c, err)
			}
		default:
			t.Errorf("a command this test does not know: %s", c)
		}
	}
	if invoked < len(functions) || network == "" || container == "" || tableFile == "" {
		t.Fatalf("the sequence of docs/sam-local.md lacks a step: %d invocations, network %q, container %q, table file %q", invoked, network, container, tableFile)
	}

	envFile := ""
	for _, command := range []string{"local_invoke", "local_start_api"} {
		params := sc.tables["default."+command+".parameters"]
		envFile = unquote(t, params["env_vars"])
		if got := unquote(t, params["docker_network"]); got != network {
			t.Errorf("[default.%s.parameters] docker_network = %q, want %q", command, got, network)
		}
	}
	raw, err := os.ReadFile(filepath.Join("..", "..", envFile))
	if err != nil {
		t.Fatal(err)
	}
	var env struct{ Parameters map[string]string }
	if err := json.Unmarshal(raw, &env); err != nil {
		t.Fatalf("%s: %v", envFile, err)
	}
	for _, id := range append(slices.Sorted(maps.Keys(functions)), memoryFunction) {
		declared, _ := get(tp.properties(id), "Environment", "Variables").(map[string]any)
		for k := range env.Parameters {
			if _, ok := declared[k]; !ok {
				t.Errorf("%s sets %s, which %s does not declare, so sam local would ignore it", envFile, k, id)
			}
		}
	}
	endpoint, err := url.Parse(env.Parameters["AWS_ENDPOINT_URL_DYNAMODB"])
	if err != nil || endpoint.Hostname() != container || endpoint.Port() != port {
		t.Errorf("AWS_ENDPOINT_URL_DYNAMODB = %q; want the container %s on port %s", env.Parameters["AWS_ENDPOINT_URL_DYNAMODB"], container, port)
	}

	raw, err = os.ReadFile(filepath.Join("..", "..", tableFile))
	if err != nil {
		t.Fatal(err)
	}
	var table dynamodb.CreateTableInput
	if err := json.Unmarshal(raw, &table); err != nil {
		t.Fatalf("%s: %v", tableFile, err)
	}
	// Both through encoding/json: the SDK's types hold unexported fields.
	if diff := cmp.Diff(asJSON(t, ddbhistory.TableDefinition(env.Parameters["TABLE_NAME"])), asJSON(t, &table)); diff != "" {
		t.Errorf("%s is not the store's table (-want +got):\n%s", tableFile, diff)
	}
}

// flag returns the value after the flag name in the command's fields.
func flag(fields []string, name string) string {
	if i := slices.Index(fields, name); i >= 0 && i+1 < len(fields) {
		return fields[i+1]
	}
	return ""
}

// asJSON returns v as encoding/json sees it.
func asJSON(t *testing.T, v any) any {
	t.Helper()
	raw, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	_ = json.Unmarshal(raw, &out) // it was just encoded
	return out
}

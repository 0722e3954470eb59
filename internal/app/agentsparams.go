package app

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	"github.com/aws/aws-sdk-go-v2/service/ssm/types"
	"github.com/lambda-agent/lambda-agent/internal/remote"
)

// ParametersByPath is the part of *ssm.Client that reads AGENTS from a
// path. Its errors are the SDK's.
type ParametersByPath interface {
	GetParametersByPath(ctx context.Context, in *ssm.GetParametersByPathInput, optFns ...func(*ssm.Options)) (*ssm.GetParametersByPathOutput, error)
}

var _ ParametersByPath = (*ssm.Client)(nil)

// agentsPathPrefix marks an AGENTS that names an SSM path.
const agentsPathPrefix = "ssm:"

// agentsPathPattern is the path of an AGENTS that names one: a parameter
// hierarchy, perhaps with a slash at its end. SSM takes 2048 characters
// and 15 levels.
var agentsPathPattern = regexp.MustCompile(`^(/[a-zA-Z0-9_.-]+)+/?$`)

// agentsPath reads the path of an AGENTS that names one, v without its
// ssm: prefix, or says what is wrong with it.
func agentsPath(v string) (string, error) {
	path := strings.TrimPrefix(v, agentsPathPrefix)
	if !agentsPathPattern.MatchString(path) || len(path) > 2048 || strings.Count(strings.TrimSuffix(path, "/"), "/") > 15 {
		return "", fmt.Errorf("%q is not an SSM parameter path: want ssm:/a/path, of letters, digits and _ . -, at most 15 levels", v)
	}
	return path, nil
}

// ssmTimeout bounds each reading of SSM at init: MCP servers' secrets,
// and the agents of an AGENTS path.
const ssmTimeout = 5 * time.Second

// MaxSystemPrompt bounds a system prompt read from SSM: SSM's advanced
// parameters hold 8 KB, and a prompt takes that much of every request.
const MaxSystemPrompt = 8 << 10

// LoadSystemPrompt reads the system prompt from cfg.SystemPromptParam,
// when it is set, decrypted: one GetParameter at init.
func LoadSystemPrompt(ctx context.Context, client remote.ParameterGetter, cfg *Config) error {
	if cfg.SystemPromptParam == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, ssmTimeout)
	defer cancel()
	out, err := client.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String(cfg.SystemPromptParam), WithDecryption: aws.Bool(true)})
	if err != nil {
		return fmt.Errorf("configuration: SYSTEM_PROMPT: read the parameter %s: %w", cfg.SystemPromptParam, err)
	}
	v := aws.ToString(out.Parameter.Value)
	if strings.TrimSpace(v) == "" || len(v) > MaxSystemPrompt {
		return fmt.Errorf("configuration: SYSTEM_PROMPT: the parameter %s holds %d bytes; want a prompt of 1 to %d that is not blank", cfg.SystemPromptParam, len(v), MaxSystemPrompt)
	}
	cfg.SystemPrompt = v
	return nil
}

// parametersUnder reads the parameters directly under path, decrypted,
// through every page, in the order of their names: at least one, at most
// limit, each an entry (a what) of the variable that names the path.
func parametersUnder(ctx context.Context, client ParametersByPath, variable, path string, limit int, what string) ([]types.Parameter, error) {
	ctx, cancel := context.WithTimeout(ctx, ssmTimeout)
	defer cancel()
	var params []types.Parameter
	pages := ssm.NewGetParametersByPathPaginator(client, &ssm.GetParametersByPathInput{
		Path:           aws.String(path),
		Recursive:      aws.Bool(false),
		WithDecryption: aws.Bool(true),
	})
	for pages.HasMorePages() {
		out, err := pages.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("configuration: %s: read the parameters under %s: %w", variable, path, err)
		}
		if params = append(params, out.Parameters...); len(params) > limit {
			return nil, fmt.Errorf("configuration: %s: more than %d parameters under %s; at most %d %ss", variable, limit, path, limit, what)
		}
	}
	if len(params) == 0 {
		return nil, fmt.Errorf("configuration: %s: no parameters under %s: each %s is one, a JSON object", variable, path, what)
	}
	slices.SortFunc(params, func(a, b types.Parameter) int { return cmp.Compare(aws.ToString(a.Name), aws.ToString(b.Name)) })
	return params, nil
}

// MaxA2AAgents bounds the remote agents of an A2A_AGENTS path.
const MaxA2AAgents = 20

// LoadA2AAgents reads the remote agents of cfg.A2AAgentsPath into
// cfg.A2AAgents, when it is set: one a parameter directly under the path,
// each a JSON object as an entry of the inline list, checked as the list
// is (in the order of the parameters' names), and against the tools and
// sub-agents.
func LoadA2AAgents(ctx context.Context, client ParametersByPath, cfg *Config) error {
	if cfg.A2AAgentsPath == "" {
		return nil
	}
	params, err := parametersUnder(ctx, client, "A2A_AGENTS", cfg.A2AAgentsPath, MaxA2AAgents, "agent")
	if err != nil {
		return err
	}
	values := make([]string, len(params))
	for i, p := range params {
		values[i] = aws.ToString(p.Value)
	}
	agents, err := remote.ParseA2AAgents("[" + strings.Join(values, ",") + "]")
	if err == nil {
		cfg.A2AAgents = agents
		err = errors.Join(checkAudiences(cfg)...)
	}
	if err != nil {
		cfg.A2AAgents = nil
		return fmt.Errorf("configuration: A2A_AGENTS: %s (its parameters in name order): %w", agentsPathPrefix+cfg.A2AAgentsPath, err)
	}
	return nil
}

// LoadAgents reads the agents of cfg.AgentsPath into cfg.Agents, when it
// is set: one a parameter directly under the path, each a JSON object as
// an entry of the inline list, read decrypted with GetParametersByPath,
// page by page, in the order of their names. They are checked as the
// inline list is, together with the MCP_SERVERS and LAMBDA_TOOLS entries
// that name agents, and an error names every problem, each with its
// parameter's name.
func LoadAgents(ctx context.Context, client ParametersByPath, cfg *Config) error {
	if cfg.AgentsPath == "" {
		return nil
	}
	params, err := parametersUnder(ctx, client, "AGENTS", cfg.AgentsPath, MaxSubAgents, "agent")
	if err != nil {
		return err
	}
	agents := make([]SubAgent, len(params))
	where := make([]string, len(params))
	var errs []error
	for i, p := range params {
		where[i] = aws.ToString(p.Name)
		dec := json.NewDecoder(strings.NewReader(aws.ToString(p.Value)))
		dec.DisallowUnknownFields()
		switch err := dec.Decode(&agents[i]); {
		case err != nil:
			errs = append(errs, fmt.Errorf("%s: want a JSON object of an agent: %w", where[i], err))
		case dec.More():
			errs = append(errs, fmt.Errorf("%s: unexpected data after the JSON object", where[i]))
		}
	}
	if len(errs) == 0 {
		if err := checkAgents(agents, where, cfg); err != nil {
			errs = append(errs, err)
		} else {
			cfg.Agents = agents
			errs = append(errs, checkAudiences(cfg)...)
		}
	}
	if err := errors.Join(errs...); err != nil {
		cfg.Agents = nil
		return fmt.Errorf("configuration: AGENTS: %s: %w", agentsPathPrefix+cfg.AgentsPath, err)
	}
	return nil
}

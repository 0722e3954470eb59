package remote

import (
	"context"
	"fmt"
	"maps"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
)

// ParameterGetter is the part of *ssm.Client that reads secrets.
type ParameterGetter interface {
	GetParameter(ctx context.Context, in *ssm.GetParameterInput, optFns ...func(*ssm.Options)) (*ssm.GetParameterOutput, error)
}

// ResolveSecrets reads the SSM parameters that the servers' SecretHeaders
// name, each once, decrypted, and returns the servers with those values in
// their Headers. A server whose secret cannot be read is left out, and its
// error returned: without its credentials, its tools cannot work.
func ResolveSecrets(ctx context.Context, client ParameterGetter, servers []MCPServer) ([]MCPServer, []error) {
	return resolveSecrets(ctx, client, servers, func(s *MCPServer) (string, *map[string]string, map[string]string) {
		return "MCP server " + s.Name, &s.Headers, s.SecretHeaders
	})
}

// ResolveA2ASecrets is ResolveSecrets for A2A agents: it returns the agents
// with the values of their SecretHeaders in their Headers, and leaves out
// an agent whose secret cannot be read, with its error.
func ResolveA2ASecrets(ctx context.Context, client ParameterGetter, agents []A2AAgent) ([]A2AAgent, []error) {
	return resolveSecrets(ctx, client, agents, func(a *A2AAgent) (string, *map[string]string, map[string]string) {
		return "A2A agent " + a.Name, &a.Headers, a.SecretHeaders
	})
}

// resolveSecrets is ResolveSecrets for any entry that has headers and
// secret headers: fields gives an entry's name for errors, where its
// headers are, and its secret headers.
func resolveSecrets[T any](ctx context.Context, client ParameterGetter, entries []T, fields func(*T) (name string, headers *map[string]string, secrets map[string]string)) ([]T, []error) {
	values := map[string]string{}
	var out []T
	var errs []error
	for _, e := range entries {
		name, headers, secrets := fields(&e)
		if len(secrets) == 0 {
			out = append(out, e)
			continue
		}
		h := maps.Clone(*headers)
		if h == nil {
			h = map[string]string{}
		}
		var failed error
		for header, param := range secrets {
			v, ok := values[param]
			if !ok {
				p, err := client.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String(param), WithDecryption: aws.Bool(true)})
				if err != nil {
					failed = fmt.Errorf("%s: read the SSM parameter %s for the header %s: %w", name, param, header, err)
					break
				}
				if p.Parameter == nil || p.Parameter.Value == nil {
					failed = fmt.Errorf("%s: the SSM parameter %s has no value", name, param)
					break
				}
				v = *p.Parameter.Value
				values[param] = v
			}
			h[header] = v
		}
		if failed != nil {
			errs = append(errs, failed)
			continue
		}
		*headers = h
		out = append(out, e)
	}
	return out, errs
}

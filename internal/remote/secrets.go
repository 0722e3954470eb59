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
	values := map[string]string{}
	var out []MCPServer
	var errs []error
	for _, s := range servers {
		if len(s.SecretHeaders) == 0 {
			out = append(out, s)
			continue
		}
		h := maps.Clone(s.Headers)
		if h == nil {
			h = map[string]string{}
		}
		var failed error
		for header, name := range s.SecretHeaders {
			v, ok := values[name]
			if !ok {
				p, err := client.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String(name), WithDecryption: aws.Bool(true)})
				if err != nil {
					failed = fmt.Errorf("MCP server %s: read the SSM parameter %s for the header %s: %w", s.Name, name, header, err)
					break
				}
				if p.Parameter == nil || p.Parameter.Value == nil {
					failed = fmt.Errorf("MCP server %s: the SSM parameter %s has no value", s.Name, name)
					break
				}
				v = *p.Parameter.Value
				values[name] = v
			}
			h[header] = v
		}
		if failed != nil {
			errs = append(errs, failed)
			continue
		}
		s.Headers = h
		out = append(out, s)
	}
	return out, errs
}

package conversetest

import (
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/bedrockruntime"
	"github.com/lambda-agent/lambda-agent/internal/sdkhttp"
)

// ClientOptions returns options for a real Bedrock Runtime client that talks
// to s: BaseEndpoint is s.URL, the region is us-east-1, the credentials are
// static fakes, and retries are off so that every call is exactly one
// request and a scripted error reaches the caller unchanged.
//
// The options do not read the environment or shared config files, so
// AWS_BEARER_TOKEN_BEDROCK and friends cannot redirect the client. Every
// client made from them shares one connection pool, which Close empties, so
// making many clients does not leak connections.
func (s *Server) ClientOptions() bedrockruntime.Options {
	return bedrockruntime.Options{
		HTTPClient:   sdkhttp.Wrap(s.client),
		Region:       "us-east-1",
		BaseEndpoint: aws.String(s.URL),
		Credentials:  credentials.NewStaticCredentialsProvider("AKID", "SECRET", ""),
		Retryer:      aws.NopRetryer{},
	}
}

// Client returns a real Bedrock Runtime client built from ClientOptions and
// then optFns, for example to put a retryer back. An HTTP client that optFns
// set gets the workaround of package sdkhttp too, as production clients do.
func (s *Server) Client(optFns ...func(*bedrockruntime.Options)) *bedrockruntime.Client {
	optFns = append(optFns, func(o *bedrockruntime.Options) { o.HTTPClient = sdkhttp.Wrap(o.HTTPClient) })
	return bedrockruntime.New(s.ClientOptions(), optFns...)
}

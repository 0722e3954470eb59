package ssmtest_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	"github.com/aws/aws-sdk-go-v2/service/ssm/types"
	"github.com/aws/smithy-go"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/lambda-agent/lambda-agent/internal/testkit"
	"github.com/lambda-agent/lambda-agent/internal/testkit/ssmtest"
)

func newServer(t *testing.T) *ssmtest.Server {
	t.Helper()
	srv := ssmtest.NewServer()
	t.Cleanup(srv.Close)
	return srv
}

// ignoreDate leaves LastModifiedDate out of comparisons; it is checked on
// its own.
var ignoreDate = cmpopts.IgnoreFields(types.Parameter{}, "LastModifiedDate")

func TestGetParameter(t *testing.T) {
	srv := newServer(t)
	before := time.Now().Add(-time.Second)
	srv.Put("/agent/mcp/token", "s3cret", true)
	srv.Put("/agent/mcp/url", "https://mcp.example.com", false)
	srv.Put("plain", "v1", false)
	srv.Put("plain", "v2", false)
	client := srv.Client()

	tests := []struct {
		name    string
		in      ssm.GetParameterInput
		want    types.Parameter
		wantEnc bool // Value is the stand-in ciphertext, not the plaintext
	}{
		{
			name: "SecureString decrypted",
			in:   ssm.GetParameterInput{Name: aws.String("/agent/mcp/token"), WithDecryption: aws.Bool(true)},
			want: types.Parameter{
				ARN: aws.String("arn:aws:ssm:us-east-1:123456789012:parameter/agent/mcp/token"), DataType: aws.String("text"),
				Name: aws.String("/agent/mcp/token"), Type: types.ParameterTypeSecureString, Value: aws.String("s3cret"), Version: 1,
			},
		},
		{
			name: "SecureString not decrypted",
			in:   ssm.GetParameterInput{Name: aws.String("/agent/mcp/token")},
			want: types.Parameter{
				ARN: aws.String("arn:aws:ssm:us-east-1:123456789012:parameter/agent/mcp/token"), DataType: aws.String("text"),
				Name: aws.String("/agent/mcp/token"), Type: types.ParameterTypeSecureString, Version: 1,
			},
			wantEnc: true,
		},
		{
			name: "String, by ARN",
			in:   ssm.GetParameterInput{Name: aws.String("arn:aws:ssm:us-east-1:123456789012:parameter/agent/mcp/url")},
			want: types.Parameter{
				ARN: aws.String("arn:aws:ssm:us-east-1:123456789012:parameter/agent/mcp/url"), DataType: aws.String("text"),
				Name: aws.String("/agent/mcp/url"), Type: types.ParameterTypeString, Value: aws.String("https://mcp.example.com"), Version: 1,
			},
		},
		{
			name: "latest version, name without a path, spaces around it",
			in:   ssm.GetParameterInput{Name: aws.String(" plain "), WithDecryption: aws.Bool(true)},
			want: types.Parameter{
				ARN: aws.String("arn:aws:ssm:us-east-1:123456789012:parameter/plain"), DataType: aws.String("text"),
				Name: aws.String("plain"), Type: types.ParameterTypeString, Value: aws.String("v2"), Version: 2,
			},
		},
		{
			name: "an older version by ARN",
			in:   ssm.GetParameterInput{Name: aws.String("arn:aws:ssm:us-east-1:123456789012:parameter/plain:1")},
			want: types.Parameter{
				ARN: aws.String("arn:aws:ssm:us-east-1:123456789012:parameter/plain"), DataType: aws.String("text"),
				Name: aws.String("plain"), Selector: aws.String(":1"), Type: types.ParameterTypeString, Value: aws.String("v1"), Version: 1,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := client.GetParameter(t.Context(), &tt.in)
			if err != nil {
				t.Fatalf("GetParameter: %v", err)
			}
			got := *out.Parameter
			if d := aws.ToTime(got.LastModifiedDate); d.Before(before) || d.After(time.Now().Add(time.Second)) {
				t.Errorf("LastModifiedDate = %v, want about now", d)
			}
			if tt.wantEnc {
				v := aws.ToString(got.Value)
				if !strings.HasPrefix(v, "AQICAH") || strings.Contains(v, "s3cret") {
					t.Errorf("Value = %q, want a ciphertext without the plaintext", v)
				}
				got.Value = nil
			}
			if diff := cmp.Diff(tt.want, got, ignoreDate, cmpopts.IgnoreUnexported(types.Parameter{})); diff != "" {
				t.Errorf("Parameter (-want +got):\n%s", diff)
			}
		})
	}
}

func TestGetParameterRefusals(t *testing.T) {
	srv := newServer(t)
	srv.Put("/agent/key", "v", true)
	srv.Put("/agent/mcp/token", "v", true)
	client := srv.Client()

	tests := []struct {
		name        string
		param       string
		wantCode    string
		wantMessage string
		typed       func(error) bool
	}{
		{
			name:     "unknown name",
			param:    "/agent/nope",
			wantCode: "ParameterNotFound",
			typed:    func(err error) bool { var e *types.ParameterNotFound; return errors.As(err, &e) },
		},
		{
			name:     "another account's ARN",
			param:    "arn:aws:ssm:us-east-1:999999999999:parameter/agent/key",
			wantCode: "ParameterNotFound",
			typed:    func(err error) bool { var e *types.ParameterNotFound; return errors.As(err, &e) },
		},
		{
			name:     "a label, which none has",
			param:    "/agent/key:prod",
			wantCode: "ParameterNotFound",
			typed:    func(err error) bool { var e *types.ParameterNotFound; return errors.As(err, &e) },
		},
		{
			name:        "unknown version",
			param:       "/agent/key:2",
			wantCode:    "ParameterVersionNotFound",
			wantMessage: "Systems Manager could not find version 2 of /agent/key. Verify the version and try again.",
			typed:       func(err error) bool { var e *types.ParameterVersionNotFound; return errors.As(err, &e) },
		},
		{
			name:        "space inside",
			param:       "/agent/mcp token",
			wantCode:    "ValidationException",
			wantMessage: `Parameter name: can't be prefixed with "ssm" (case-insensitive). If formed as a path, it can consist of sub-paths divided by slash symbol; each sub-path can be formed as a mix of letters, numbers and the following 3 symbols .-_`,
			// No typed check: the SSM client in go.mod (v1.79.3, the last
			// before the SDK's schema-based serde, which costs the chat
			// function 1.3 ms of init) types no ValidationException for
			// GetParameter or GetParameters; the code is the same.
		},
		{
			name:        "path without a leading slash",
			param:       "agent/mcp/token",
			wantCode:    "ValidationException",
			wantMessage: "Parameter name must be a fully qualified name.",
		},
		{name: "reserved prefix", param: "ssm-token", wantCode: "ValidationException"},
		{name: "empty segment", param: "/agent//token", wantCode: "ValidationException"},
		{name: "too long", param: "/" + strings.Repeat("a", 2048), wantCode: "ValidationException"},
		{name: "not an SSM ARN", param: "arn:aws:s3:::bucket/key", wantCode: "ValidationException"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := client.GetParameter(t.Context(), &ssm.GetParameterInput{Name: aws.String(tt.param), WithDecryption: aws.Bool(true)})
			var ae smithy.APIError
			if !errors.As(err, &ae) {
				t.Fatalf("GetParameter: %v, want an API error", err)
			}
			var re *awshttp.ResponseError
			if !errors.As(err, &re) || re.HTTPStatusCode() != http.StatusBadRequest {
				t.Errorf("status of %v, want 400", err)
			}
			if ae.ErrorCode() != tt.wantCode {
				t.Errorf("code = %s, want %s", ae.ErrorCode(), tt.wantCode)
			}
			if tt.wantMessage != "" && ae.ErrorMessage() != tt.wantMessage {
				t.Errorf("message = %q, want %q", ae.ErrorMessage(), tt.wantMessage)
			}
			if tt.typed != nil && !tt.typed(err) {
				t.Errorf("error %T is not the SDK's typed error for %s", err, tt.wantCode)
			}
		})
	}
	if got, want := srv.Calls(), len(tests); got != want {
		t.Errorf("Calls = %d, want %d: refused reads count too", got, want)
	}
}

func TestGetParameters(t *testing.T) {
	srv := newServer(t)
	srv.Put("/b", "two", false)
	srv.Put("/a", "one", true)
	out, err := srv.Client().GetParameters(t.Context(), &ssm.GetParametersInput{
		Names:          []string{"/b", "/missing", "/a"},
		WithDecryption: aws.Bool(true),
	})
	if err != nil {
		t.Fatalf("GetParameters: %v", err)
	}
	var got []string
	for _, p := range out.Parameters {
		got = append(got, aws.ToString(p.Name)+"="+aws.ToString(p.Value))
	}
	if diff := cmp.Diff([]string{"/a=one", "/b=two"}, got); diff != "" {
		t.Errorf("Parameters (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"/missing"}, out.InvalidParameters); diff != "" {
		t.Errorf("InvalidParameters (-want +got):\n%s", diff)
	}

	_, err = srv.Client().GetParameters(t.Context(), &ssm.GetParametersInput{Names: strings.Split("/1 /2 /3 /4 /5 /6 /7 /8 /9 /10 /11", " ")})
	var ve smithy.APIError
	if !errors.As(err, &ve) || ve.ErrorCode() != "ValidationException" {
		t.Errorf("11 names: %v, want ValidationException", err)
	}
}

func TestRequestsRecordDecryption(t *testing.T) {
	srv := newServer(t)
	srv.Put("/agent/key", "v", true)
	if _, err := srv.Client().GetParameter(t.Context(), &ssm.GetParameterInput{Name: aws.String("/agent/key"), WithDecryption: aws.Bool(true)}); err != nil {
		t.Fatal(err)
	}
	want := []ssmtest.Request{{Operation: "GetParameter", Names: []string{"/agent/key"}, WithDecryption: true}}
	if diff := cmp.Diff(want, srv.Requests()); diff != "" {
		t.Errorf("Requests (-want +got):\n%s", diff)
	}
}

func TestUnsignedRequestsAreRefused(t *testing.T) {
	srv := newServer(t)
	srv.Put("/agent/key", "v", true)

	client := srv.Client(func(o *ssm.Options) { o.Credentials = aws.AnonymousCredentials{} })
	_, err := client.GetParameter(t.Context(), &ssm.GetParameterInput{Name: aws.String("/agent/key")})
	var ae smithy.APIError
	var re *awshttp.ResponseError
	if !errors.As(err, &ae) || ae.ErrorCode() != "MissingAuthenticationTokenException" || !errors.As(err, &re) || re.HTTPStatusCode() != http.StatusForbidden {
		t.Errorf("unsigned GetParameter: %v, want 403 MissingAuthenticationTokenException", err)
	}

	lambdaSigned := srv.Client(func(o *ssm.Options) {
		o.HTTPClient = signingNameRewriter{o.HTTPClient}
	})
	_, err = lambdaSigned.GetParameter(t.Context(), &ssm.GetParameterInput{Name: aws.String("/agent/key")})
	if !errors.As(err, &ae) || ae.ErrorCode() != "InvalidSignatureException" {
		t.Errorf("GetParameter signed for lambda: %v, want InvalidSignatureException", err)
	}
	if got := srv.Calls(); got != 0 {
		t.Errorf("Calls = %d, want 0", got)
	}
}

// signingNameRewriter scopes a signed request's credential to lambda, as a
// client configured with the wrong signing name would.
type signingNameRewriter struct{ next aws.HTTPClient }

func (c signingNameRewriter) Do(r *http.Request) (*http.Response, error) {
	r.Header.Set("Authorization", strings.Replace(r.Header.Get("Authorization"), "/ssm/aws4_request", "/lambda/aws4_request", 1))
	return c.next.Do(r)
}

func TestPutRefusesWhatSSMRefuses(t *testing.T) {
	srv := newServer(t)
	for _, name := range []string{"", "agent/key", "awsKey", "/a b", "/a/"} {
		t.Run(name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Errorf("Put(%q) did not panic", name)
				}
			}()
			srv.Put(name, "v", false)
		})
	}
}

// TestEndpointFromEnvironment shows that the standard setting alone,
// AWS_ENDPOINT_URL_SSM, sends a default-configured client to the server,
// which a program reads once at init.
func TestEndpointFromEnvironment(t *testing.T) {
	srv := newServer(t)
	srv.Put("/agent/mcp/token", "s3cret", true)
	cfg := testkit.DefaultAWSConfig(t, "eu-north-1", map[string]string{"AWS_ENDPOINT_URL_SSM": srv.URL})
	out, err := ssm.NewFromConfig(cfg).GetParameter(t.Context(), &ssm.GetParameterInput{
		Name:           aws.String("/agent/mcp/token"),
		WithDecryption: aws.Bool(true),
	})
	if err != nil {
		t.Fatalf("GetParameter: %v", err)
	}
	if got := aws.ToString(out.Parameter.Value); got != "s3cret" {
		t.Errorf("Value = %q, want s3cret", got)
	}
	// ARNs name the region the client signed for.
	if got, want := aws.ToString(out.Parameter.ARN), "arn:aws:ssm:eu-north-1:123456789012:parameter/agent/mcp/token"; got != want {
		t.Errorf("ARN = %q, want %q", got, want)
	}
	if got := srv.Calls(); got != 1 {
		t.Errorf("Calls = %d, want 1", got)
	}
}

// byPath reads every page of GetParametersByPath with the SDK's paginator,
// as a program does, and returns the names and values it read.
func byPath(t *testing.T, client *ssm.Client, in ssm.GetParametersByPathInput) []string {
	t.Helper()
	var got []string
	pages := ssm.NewGetParametersByPathPaginator(client, &in)
	for pages.HasMorePages() {
		out, err := pages.NextPage(t.Context())
		if err != nil {
			t.Fatalf("GetParametersByPath: %v", err)
		}
		for _, p := range out.Parameters {
			got = append(got, aws.ToString(p.Name)+"="+aws.ToString(p.Value))
		}
	}
	return got
}

func TestGetParametersByPath(t *testing.T) {
	srv := newServer(t)
	// Put out of name order: the listing keeps the order of creation.
	srv.Put("/app/agents/writer", "w", false)
	srv.Put("/app/agents/researcher", "r", true)
	srv.Put("/app/agents/deep/editor", "e", false)
	srv.Put("/app/agentsx", "not under the path", false)
	srv.Put("/app/agents", "the path's own parameter", false)
	srv.Put("/other", "o", false)
	client := srv.Client()

	tests := []struct {
		name string
		in   ssm.GetParametersByPathInput
		want []string
	}{
		{"children, decrypted", ssm.GetParametersByPathInput{Path: aws.String("/app/agents"), WithDecryption: aws.Bool(true)},
			[]string{"/app/agents/writer=w", "/app/agents/researcher=r"}},
		{"a slash at the end, one a page", ssm.GetParametersByPathInput{Path: aws.String("/app/agents/"), WithDecryption: aws.Bool(true), MaxResults: aws.Int32(1)},
			[]string{"/app/agents/writer=w", "/app/agents/researcher=r"}},
		{"recursive", ssm.GetParametersByPathInput{Path: aws.String("/app/agents"), Recursive: aws.Bool(true), WithDecryption: aws.Bool(true)},
			[]string{"/app/agents/writer=w", "/app/agents/researcher=r", "/app/agents/deep/editor=e"}},
		{"the root", ssm.GetParametersByPathInput{Path: aws.String("/")}, []string{"/other=o"}},
		{"nothing under it", ssm.GetParametersByPathInput{Path: aws.String("/nothing")}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, byPath(t, client, tt.in)); diff != "" {
				t.Errorf("parameters (-want +got):\n%s", diff)
			}
		})
	}

	// Without WithDecryption, a SecureString's value is its ciphertext.
	out, err := client.GetParametersByPath(t.Context(), &ssm.GetParametersByPathInput{Path: aws.String("/app/agents")})
	if err != nil {
		t.Fatal(err)
	}
	if v := aws.ToString(out.Parameters[1].Value); !strings.HasPrefix(v, "AQICAH") || out.Parameters[1].Type != types.ParameterTypeSecureString {
		t.Errorf("an undecrypted SecureString: %s %q", out.Parameters[1].Type, v)
	}

	// A page of one: its token continues the listing, and is recorded.
	srv2 := newServer(t)
	srv2.Put("/p/a", "1", false)
	srv2.Put("/p/b", "2", false)
	first, err := srv2.Client().GetParametersByPath(t.Context(), &ssm.GetParametersByPathInput{Path: aws.String("/p"), MaxResults: aws.Int32(1)})
	if err != nil || len(first.Parameters) != 1 || first.NextToken == nil {
		t.Fatalf("the first page: %+v, %v", first, err)
	}
	last, err := srv2.Client().GetParametersByPath(t.Context(), &ssm.GetParametersByPathInput{Path: aws.String("/p"), MaxResults: aws.Int32(1), NextToken: first.NextToken})
	if err != nil || len(last.Parameters) != 1 || aws.ToString(last.Parameters[0].Name) != "/p/b" || last.NextToken != nil {
		t.Fatalf("the last page: %+v, %v", last, err)
	}
	want := []ssmtest.Request{
		{Operation: "GetParametersByPath", Path: "/p", MaxResults: 1},
		{Operation: "GetParametersByPath", Path: "/p", MaxResults: 1, NextToken: aws.ToString(first.NextToken)},
	}
	if diff := cmp.Diff(want, srv2.Requests()); diff != "" {
		t.Errorf("Requests (-want +got):\n%s", diff)
	}
}

// TestGetParametersByPathShortPages: with best-effort pages, a reader that
// follows NextToken gets everything, and one that stops at an empty page
// gets nothing.
func TestGetParametersByPathShortPages(t *testing.T) {
	srv := newServer(t)
	for _, n := range []string{"a", "b", "c"} {
		srv.Put("/p/"+n, n, false)
	}
	srv.SetShortPages(true)
	client := srv.Client()
	if diff := cmp.Diff([]string{"/p/a=a", "/p/b=b", "/p/c=c"}, byPath(t, client, ssm.GetParametersByPathInput{Path: aws.String("/p")})); diff != "" {
		t.Errorf("parameters (-want +got):\n%s", diff)
	}
	if got := srv.Calls(); got != 6 {
		t.Errorf("%d pages, want 6: three empty, three of one", got)
	}
	first, err := client.GetParametersByPath(t.Context(), &ssm.GetParametersByPathInput{Path: aws.String("/p")})
	if err != nil || len(first.Parameters) != 0 || first.NextToken == nil {
		t.Errorf("the first page: %d parameters, token %v, %v; want none, and a token", len(first.Parameters), first.NextToken, err)
	}
}

func TestGetParametersByPathRefusals(t *testing.T) {
	srv := newServer(t)
	srv.Put("/p/a", "1", false)
	srv.Put("/p/b", "2", false)
	client := srv.Client()
	page, err := client.GetParametersByPath(t.Context(), &ssm.GetParametersByPathInput{Path: aws.String("/p"), MaxResults: aws.Int32(1)})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		in       ssm.GetParametersByPathInput
		wantCode string
		typed    func(error) bool
	}{
		{name: "eleven a page", in: ssm.GetParametersByPathInput{Path: aws.String("/p"), MaxResults: aws.Int32(11)}, wantCode: "ValidationException"},
		{name: "none a page", in: ssm.GetParametersByPathInput{Path: aws.String("/p"), MaxResults: aws.Int32(0)}, wantCode: "ValidationException"},
		{name: "no leading slash", in: ssm.GetParametersByPathInput{Path: aws.String("p/q")}, wantCode: "ValidationException"},
		{name: "a space inside", in: ssm.GetParametersByPathInput{Path: aws.String("/p q")}, wantCode: "ValidationException"},
		{name: "sixteen levels", in: ssm.GetParametersByPathInput{Path: aws.String(strings.Repeat("/l", 16))}, wantCode: "ValidationException"},
		{name: "too long", in: ssm.GetParametersByPathInput{Path: aws.String("/" + strings.Repeat("a", 2048))}, wantCode: "ValidationException"},
		{name: "filters", in: ssm.GetParametersByPathInput{Path: aws.String("/p"), ParameterFilters: []types.ParameterStringFilter{{Key: aws.String("Type"), Values: []string{"String"}}}}, wantCode: "ValidationException"},
		{
			name: "a token of its own", in: ssm.GetParametersByPathInput{Path: aws.String("/p"), NextToken: aws.String("made-up")}, wantCode: "InvalidNextToken",
			typed: func(err error) bool { var e *types.InvalidNextToken; return errors.As(err, &e) },
		},
		{
			name: "another path's token", in: ssm.GetParametersByPathInput{Path: aws.String("/q"), NextToken: page.NextToken}, wantCode: "InvalidNextToken",
			typed: func(err error) bool { var e *types.InvalidNextToken; return errors.As(err, &e) },
		},
		{
			name: "the token of a listing that was not recursive", in: ssm.GetParametersByPathInput{Path: aws.String("/p"), Recursive: aws.Bool(true), NextToken: page.NextToken}, wantCode: "InvalidNextToken",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := client.GetParametersByPath(t.Context(), &tt.in)
			var ae smithy.APIError
			if !errors.As(err, &ae) || ae.ErrorCode() != tt.wantCode {
				t.Fatalf("GetParametersByPath: %v, want %s", err, tt.wantCode)
			}
			var re *awshttp.ResponseError
			if !errors.As(err, &re) || re.HTTPStatusCode() != http.StatusBadRequest {
				t.Errorf("status of %v, want 400", err)
			}
			if tt.typed != nil && !tt.typed(err) {
				t.Errorf("error %T is not the SDK's typed error for %s", err, tt.wantCode)
			}
		})
	}
}

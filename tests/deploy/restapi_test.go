package deploy

import (
	"encoding/json"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// The streaming REST API: its stage, and its one method, which the stream
// function's event declares.
const (
	restAPI   = "StreamApi"
	restStage = "stream"
	restPath  = "/agui"
)

// restBody returns the REST API's OpenAPI definition as r's deployment
// resolves it: conditions chosen, parameters filled in.
func restBody(t *testing.T, r *resolver) map[string]any {
	t.Helper()
	body, _, err := r.resolve(r.tp.Resources[restAPI].Properties["DefinitionBody"])
	if err != nil {
		t.Fatal(err)
	}
	m, ok := body.(map[string]any)
	if !ok {
		t.Fatalf("DefinitionBody resolves to %v", body)
	}
	return m
}

// restAuth returns the security scheme that POST /agui requires in r's
// deployment, and "" for none; it fails t if the method names more than
// one, or a scheme the definition does not declare.
func restAuth(t *testing.T, r *resolver) string {
	t.Helper()
	body := restBody(t, r)
	security, ok := get(body, "paths", restPath, "post", "security").([]any)
	if !ok {
		if v := get(body, "paths", restPath, "post", "security"); v != nil {
			t.Fatalf("security = %v", v)
		}
		return ""
	}
	if len(security) != 1 {
		t.Fatalf("security = %v; want one requirement", security)
	}
	req, _ := security[0].(map[string]any)
	if len(req) != 1 {
		t.Fatalf("security = %v; want one scheme", security)
	}
	for name, scopes := range req {
		if get(body, "components", "securitySchemes", name) == nil {
			t.Errorf("POST %s requires %q, which components.securitySchemes does not declare", restPath, name)
		}
		if s, _ := scopes.([]any); len(s) != 0 {
			t.Errorf("scopes %v", scopes)
		}
		return name
	}
	return ""
}

// TestStreamRestApi holds the REST API to what streams: a regional
// endpoint (an edge-optimized one cuts a stream after 30 s idle), the
// stream function's event in SAM's RESPONSE_STREAM spelling, a deployment
// on every update (the auth mode lives in the definition's Fn::If, which
// SAM's deployment hash does not see), no extra stage, and the HTTP API's
// throttling.
func TestStreamRestApi(t *testing.T) {
	tp := loadTemplate(t)
	api := tp.Resources[restAPI]
	if api.Type != "AWS::Serverless::Api" || api.Condition != "" {
		t.Fatalf("%s: Type %q, Condition %q", restAPI, api.Type, api.Condition)
	}
	got := map[string]any{}
	for _, k := range []string{"StageName", "OpenApiVersion", "EndpointConfiguration", "AlwaysDeploy", "MergeDefinitions", "MethodSettings", "Auth", "Cors"} {
		got[k] = api.Properties[k]
	}
	want := map[string]any{
		"StageName":             restStage,
		"OpenApiVersion":        "3.0.1",
		"EndpointConfiguration": map[string]any{"Type": "REGIONAL"},
		"AlwaysDeploy":          "true",
		"MergeDefinitions":      "true",
		"MethodSettings": []any{map[string]any{
			"ResourcePath": "/*", "HttpMethod": "*",
			"ThrottlingRateLimit": ref("ThrottlingRateLimit"), "ThrottlingBurstLimit": ref("ThrottlingBurstLimit"),
		}},
		// Auth and CORS live in the definition, where Fn::If may choose them.
		"Auth": nil,
		"Cors": nil,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("%s (-want +got):\n%s", restAPI, diff)
	}

	fn := tp.functionProperties("ChatStreamFunction")
	events, _ := fn["Events"].(map[string]any)
	wantEvent := map[string]any{"Type": "Api", "Properties": map[string]any{
		"RestApiId": ref(restAPI), "Path": restPath, "Method": "POST",
		"ResponseTransferMode": "RESPONSE_STREAM",
		"TimeoutInMillis":      "120000",
	}}
	// A2A's JSON-RPC endpoint streams as POST /agui does; its card is a
	// plain GET.
	wantA2A := map[string]any{"Type": "Api", "Properties": map[string]any{
		"RestApiId": ref(restAPI), "Path": "/a2a", "Method": "POST",
		"ResponseTransferMode": "RESPONSE_STREAM",
		"TimeoutInMillis":      "120000",
	}}
	wantCard := map[string]any{"Type": "Api", "Properties": map[string]any{
		"RestApiId": ref(restAPI), "Path": "/.well-known/agent-card.json", "Method": "GET",
	}}
	if diff := cmp.Diff(map[string]any{"Agui": wantEvent, "A2a": wantA2A, "AgentCard": wantCard}, events); diff != "" {
		t.Errorf("the stream function's events (-want +got):\n%s", diff)
	}
	// The integration may last as long as the function: the stream ends
	// when the turn does, never cut by the gateway before.
	if timeouts["ChatStreamFunction"]+"000" != get(wantEvent, "Properties", "TimeoutInMillis") {
		t.Errorf("the integration's timeout differs from the function's, %s s", timeouts["ChatStreamFunction"])
	}
	// Every method of the definition is the event's or the preflight's.
	r := newResolver(t, tp, map[string]string{"ApiAllowedOrigins": "https://chat.example.com"})
	paths, _ := restBody(t, r)["paths"].(map[string]any)
	if got := slices.Sorted(maps.Keys(paths)); !slices.Equal(got, []string{"/.well-known/agent-card.json", "/a2a", restPath}) {
		t.Errorf("paths %v, want A2A's and %s", got, restPath)
	}
	for path, method := range map[string]string{"/a2a": "post", "/.well-known/agent-card.json": "get"} {
		if got := slices.Sorted(maps.Keys(paths[path].(map[string]any))); !slices.Equal(got, []string{method}) {
			t.Errorf("methods of %s: %v, want %s", path, got, method)
		}
	}
	if got := slices.Sorted(maps.Keys(paths[restPath].(map[string]any))); !slices.Equal(got, []string{"options", "post"}) {
		t.Errorf("methods of %s: %v, want options and post", restPath, got)
	}
}

// TestStreamRestApiAuthorizers: for each auth mode, POST /agui requires
// what the HTTP API's routes require, through the REST API's authorizers.
// A Cognito user pool's tokens are checked by a COGNITO_USER_POOLS
// authorizer of that pool, derived from the issuer, whose aud must be one
// of JwtAudience; any other issuer's by the Lambda authorizer, without
// caching, which API Gateway may invoke for this API's authorizers only.
func TestStreamRestApiAuthorizers(t *testing.T) {
	tp := loadTemplate(t)
	for _, tt := range []struct {
		name   string
		params map[string]string
		want   string
	}{
		{"defaults: IAM", nil, "sigv4"},
		{"open", map[string]string{"AllowAnonymous": "true"}, ""},
		{"a JWT issuer", jwt, "token"},
		{"a Cognito user pool", cognitoJWT, "cognito"},
		{"a Cognito user pool in China", map[string]string{"JwtIssuer": "https://cognito-idp.cn-north-1.amazonaws.com.cn/cn-north-1_AbC", "JwtAudience": "a"}, "cognito"},
		{"an issuer whose path names Cognito", map[string]string{"JwtIssuer": "https://login.example.com/cognito-idp.eu-west-1.amazonaws.com/x", "JwtAudience": "a"}, "token"},
		{"a host that begins like Cognito's", map[string]string{"JwtIssuer": "https://cognito-idp.example.com/eu-west-1_AbC", "JwtAudience": "a"}, "token"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := newResolver(t, tp, tt.params)
			r.deployable(t)
			if got := restAuth(t, r); got != tt.want {
				t.Fatalf("POST %s requires %q, want %q", restPath, got, tt.want)
			}
			// A2A's endpoint and card require the same.
			body := restBody(t, r)
			for _, at := range [][2]string{{"/a2a", "post"}, {"/.well-known/agent-card.json", "get"}} {
				if diff := cmp.Diff(get(body, "paths", restPath, "post", "security"), get(body, "paths", at[0], at[1], "security")); diff != "" {
					t.Errorf("%s %s requires other than POST %s (-agui +a2a):\n%s", at[1], at[0], restPath, diff)
				}
			}
			schemes, _ := get(restBody(t, r), "components", "securitySchemes").(map[string]any)
			wantSchemes := []string{"sigv4"}
			if tt.want != "" && tt.want != "sigv4" {
				wantSchemes = append(wantSchemes, tt.want)
			}
			if got := slices.Sorted(maps.Keys(schemes)); !cmp.Equal(slices.Sorted(slices.Values(wantSchemes)), got) {
				t.Errorf("security schemes %v, want %v", got, wantSchemes)
			}
			if sigv4 := schemes["sigv4"]; get(sigv4, "x-amazon-apigateway-authtype") != "awsSigv4" {
				t.Errorf("sigv4: %v", sigv4)
			}
			switch tt.want {
			case "cognito":
				a := get(schemes, "cognito", "x-amazon-apigateway-authorizer")
				host := strings.Split(r.params["JwtIssuer"], "/")[2]
				wantARN := "arn:aws:cognito-idp:" + strings.Split(host, ".")[1] + ":123456789012:userpool/" + strings.Split(r.params["JwtIssuer"], "/")[3]
				arns, _ := get(a, "providerARNs").([]any)
				if get(a, "type") != "cognito_user_pools" || len(arns) != 1 || r.subVars(t, arns[0]) != wantARN {
					t.Errorf("the Cognito authorizer: %v; want type cognito_user_pools, provider %s", a, wantARN)
				}
				// API Gateway matches a Cognito token's aud against the
				// identity validation expression: exactly the audiences.
				re, err := regexp.Compile(get(a, "identityValidationExpression").(string))
				if err != nil {
					t.Fatal(err)
				}
				for _, aud := range strings.Split(r.params["JwtAudience"], ",") {
					if !re.MatchString(aud) {
						t.Errorf("the audience %q does not match %s", aud, re)
					}
				}
				for _, aud := range []string{"other", "", "x" + strings.Split(r.params["JwtAudience"], ",")[0], strings.Split(r.params["JwtAudience"], ",")[0] + "x"} {
					if re.MatchString(aud) {
						t.Errorf("%q, not an audience, matches %s", aud, re)
					}
				}
			case "token":
				a := get(schemes, "token", "x-amazon-apigateway-authorizer")
				wantURI := "arn:aws:apigateway:eu-west-1:lambda:path/2015-03-31/functions/resource-AuthorizerFunction.Arn/invocations"
				if get(a, "type") != "token" || get(a, "authorizerResultTtlInSeconds") != "0" || r.subValue(t, get(a, "authorizerUri")) != wantURI {
					t.Errorf("the Lambda authorizer: %v; want type token, no caching, %s", a, wantURI)
				}
				if get(schemes, "token", "name") != "Authorization" || get(schemes, "token", "in") != "header" {
					t.Errorf("the token comes from %v", schemes["token"])
				}
				fn := tp.Resources["AuthorizerFunction"]
				env, _, err := r.resolve(get(fn.Properties, "Environment", "Variables"))
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(map[string]any{"JWT_ISSUER": r.params["JwtIssuer"], "JWT_AUDIENCE": r.params["JwtAudience"]}, env); diff != "" {
					t.Errorf("the authorizer's environment: the HTTP API's issuer and audiences, and nothing else (-want +got):\n%s", diff)
				}
				perm := tp.Resources["AuthorizerInvokePermission"]
				wantPerm := map[string]any{
					"Action": "lambda:InvokeFunction", "FunctionName": ref("AuthorizerFunction"), "Principal": "apigateway.amazonaws.com",
					"SourceArn": map[string]any{"Fn::Sub": "arn:${AWS::Partition}:execute-api:${AWS::Region}:${AWS::AccountId}:${" + restAPI + "}/authorizers/*"},
				}
				if diff := cmp.Diff(wantPerm, perm.Properties); diff != "" {
					t.Errorf("AuthorizerInvokePermission (-want +got):\n%s", diff)
				}
			}
		})
	}
}

// TestAuthorizerFunction: the Lambda authorizer is built like the other
// functions, from the root module, but is no SAM function, so that the
// Globals (the agent's environment, layers and tracing) stay off it.
func TestAuthorizerFunction(t *testing.T) {
	tp := loadTemplate(t)
	fn := tp.Resources["AuthorizerFunction"]
	got := map[string]any{
		"Type": fn.Type, "Condition": fn.Condition,
		"BuildMethod": get(fn.Metadata, "BuildMethod"),
		"Code":        fn.Properties["Code"], "Handler": fn.Properties["Handler"],
		"Runtime": fn.Properties["Runtime"], "Architectures": fn.Properties["Architectures"],
		"LogFormat": get(fn.Properties, "LoggingConfig", "LogFormat"),
	}
	want := map[string]any{
		"Type": "AWS::Lambda::Function", "Condition": "UseLambdaAuthorizer",
		"BuildMethod": "go1.x", "Code": ".", "Handler": "functions/authorizer",
		"Runtime": tp.Globals.Function["Runtime"], "Architectures": tp.Globals.Function["Architectures"],
		"LogFormat": "JSON",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("AuthorizerFunction (-want +got):\n%s", diff)
	}
	for _, id := range []string{"AuthorizerRole", "AuthorizerLogGroup", "AuthorizerInvokePermission"} {
		if c := tp.Resources[id].Condition; c != "UseLambdaAuthorizer" {
			t.Errorf("%s: Condition %q, want UseLambdaAuthorizer", id, c)
		}
	}
}

// TestStreamRestApiCors: with ApiAllowedOrigins, the browsers' preflight is
// answered by API Gateway (a mock, without auth or the function) allowing
// the request's Origin only when it is listed, with the headers and method
// the method needs; API Gateway's own error answers carry the origin too,
// named when there is one and echoed when there are several. Without
// origins there is no preflight and nothing allows an origin. The
// function's own answers allow the listed origins (ALLOWED_ORIGINS; see
// internal/lambdahttp).
func TestStreamRestApiCors(t *testing.T) {
	tp := loadTemplate(t)
	httpCors, _ := get(tp.Resources["Api"].Properties, "CorsConfiguration", "Fn::If").([]any)
	for _, tt := range []struct {
		name, origins string
		gateway       any
	}{
		{"none", "", nil},
		{"one", "https://chat.example.com", "'https://chat.example.com'"},
		{"several", "https://chat.example.com,http://localhost:3000", "method.request.header.Origin"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			r := newResolver(t, tp, map[string]string{"ApiAllowedOrigins": tt.origins})
			body := restBody(t, r)
			options := get(body, "paths", restPath, "options")
			responses := get(body, "x-amazon-apigateway-gateway-responses")
			if tt.origins == "" {
				if options != nil || responses != nil {
					t.Errorf("without origins: preflight %v, gateway responses %v", options, responses)
				}
				return
			}
			if options == nil {
				t.Fatal("no preflight")
			}
			if get(options, "security") != nil {
				t.Errorf("the preflight requires %v; browsers send it without credentials", get(options, "security"))
			}
			integration := get(options, "x-amazon-apigateway-integration")
			if get(integration, "type") != "mock" {
				t.Errorf("the preflight's integration is %v, not a mock: it would reach the function unauthenticated", get(integration, "type"))
			}
			params, _ := get(integration, "responses", "default", "responseParameters").(map[string]any)
			methods := strings.Trim(params["method.response.header.Access-Control-Allow-Methods"].(string), "'")
			if !slices.Contains(strings.Split(methods, ","), "POST") {
				t.Errorf("Allow-Methods %q lacks POST", methods)
			}
			headers := strings.Trim(params["method.response.header.Access-Control-Allow-Headers"].(string), "'")
			if len(httpCors) != 3 {
				t.Fatal("the HTTP API has no CORS rules to compare with")
			}
			if want := strings.Join(anys(get(httpCors[1], "AllowHeaders")), ","); headers != want {
				t.Errorf("Allow-Headers %q; want the HTTP API's, %q", headers, want)
			}
			if params["method.response.header.Vary"] != "'Origin'" {
				t.Errorf("the preflight's Vary: %v", params["method.response.header.Vary"])
			}
			vtl := r.subValue(t, get(integration, "responses", "default", "responseTemplates", "application/json"))
			if !strings.Contains(vtl, `",`+tt.origins+`,".contains(",$origin,")`) || !strings.Contains(vtl, "responseOverride.header.Access-Control-Allow-Origin = $origin") {
				t.Errorf("the preflight's template does not allow exactly the listed origins:\n%s", vtl)
			}
			for _, kind := range []string{"DEFAULT_4XX", "DEFAULT_5XX"} {
				p := get(responses, kind, "responseParameters")
				got := get(p, "gatewayresponse.header.Access-Control-Allow-Origin")
				if s := sub(got); s != "" {
					got = r.subValue(t, got)
				}
				if got != tt.gateway || get(p, "gatewayresponse.header.Vary") != "'Origin'" {
					t.Errorf("%s: %v; want Access-Control-Allow-Origin %v and Vary Origin", kind, p, tt.gateway)
				}
			}
			if got := r.environment(t, "ChatStreamFunction")["ALLOWED_ORIGINS"]; got != tt.origins {
				t.Errorf("ALLOWED_ORIGINS = %q", got)
			}
		})
	}
}

// TestStreamRestApiOutputs: the /agui URL a browser calls, and the resource
// an IAM caller is granted, are those of the method the event declares, on
// the API's stage.
func TestStreamRestApiOutputs(t *testing.T) {
	tp := loadTemplate(t)
	base := "https://${" + restAPI + "}.execute-api.${AWS::Region}.${AWS::URLSuffix}/" + restStage
	if got := sub(tp.Outputs["StreamApiUrl"].Value); got != base {
		t.Errorf("StreamApiUrl = %q, want %q", got, base)
	}
	if got := sub(tp.Outputs["AguiUrl"].Value); got != base+restPath {
		t.Errorf("AguiUrl = %q, want %q", got, base+restPath)
	}
	arn := sub(tp.Outputs["StreamApiInvokeArn"].Value)
	pattern := "^" + strings.ReplaceAll(regexp.QuoteMeta(arn), `\*`, ".*") + "$"
	resource := "arn:${AWS::Partition}:execute-api:${AWS::Region}:${AWS::AccountId}:${" + restAPI + "}/" + restStage + "/POST" + restPath
	if !regexp.MustCompile(pattern).MatchString(resource) {
		t.Errorf("StreamApiInvokeArn %q does not cover %s", arn, resource)
	}
	if strings.Contains(arn, "${Api}") {
		t.Errorf("StreamApiInvokeArn %q names the HTTP API", arn)
	}
}

// TestStreamRestApiTransformed runs SAM's transform, which writes the REST
// API: POST /agui's integration must stream (the response-streaming
// invocation URI, API version 2021-11-15, and the STREAM transfer mode),
// keep the definition's auth, and be the only stage's; the Lambda
// permission SAM adds is for that method on that API only. A copy of the
// template that spells the event's mode STREAM, as CloudFormation does,
// gets the buffered URI: the check that catches it.
func TestStreamRestApiTransformed(t *testing.T) {
	python := samPython(t)
	transform := func(t *testing.T, mode string) map[string]any {
		doc := loadGeneric(t)
		for id := range functions {
			get(doc, "Resources", id, "Properties").(map[string]any)["CodeUri"] = "s3://bucket/key"
		}
		if mode != "" {
			get(doc, "Resources", "ChatStreamFunction", "Properties", "Events", "Agui", "Properties").(map[string]any)["ResponseTransferMode"] = mode
		}
		input, err := json.Marshal(doc)
		if err != nil {
			t.Fatal(err)
		}
		return samTransform(t, python, input, map[string]string{})
	}
	integration := func(out map[string]any) any {
		return get(out, "Resources", restAPI, "Properties", "Body", "paths", restPath, "post", "x-amazon-apigateway-integration")
	}

	out := transform(t, "") // as written
	in := integration(out)
	uri := sub(get(in, "uri"))
	if !strings.HasSuffix(uri, "/response-streaming-invocations") || !strings.Contains(uri, ":lambda:path/2021-11-15/functions/${ChatStreamFunction.Arn}/") {
		t.Errorf("the integration's uri %q is not the stream function's response-streaming invocation", uri)
	}
	want := map[string]any{"type": "aws_proxy", "httpMethod": "POST", "responseTransferMode": "STREAM", "timeoutInMillis": 120000.0}
	for k, v := range want {
		if got := get(in, k); got != v {
			t.Errorf("integration %s = %v, want %v", k, got, v)
		}
	}
	// SAM merged its integration into the definition's method, whose auth
	// it kept.
	src := loadTemplate(t)
	if diff := cmp.Diff(get(src.Resources[restAPI].Properties, "DefinitionBody", "paths", restPath, "post", "security"),
		get(out, "Resources", restAPI, "Properties", "Body", "paths", restPath, "post", "security")); diff != "" {
		t.Errorf("the method's security after the transform (-template +transformed):\n%s", diff)
	}
	if got := get(out, "Resources", restAPI, "Properties", "EndpointConfiguration", "Types"); cmp.Diff([]any{"REGIONAL"}, got) != "" {
		t.Errorf("EndpointConfiguration.Types = %v", got)
	}
	var stages, deployments []string
	var permissions []any
	for id, res := range get(out, "Resources").(map[string]any) {
		switch get(res, "Type") {
		case "AWS::ApiGateway::Stage":
			stages = append(stages, id)
			if get(res, "Properties", "StageName") != restStage {
				t.Errorf("%s: StageName %v", id, get(res, "Properties", "StageName"))
			}
		case "AWS::ApiGateway::Deployment":
			deployments = append(deployments, id)
			if name := get(res, "Properties", "StageName"); name != nil {
				t.Errorf("%s makes a stage of its own, %v, outside the throttled one", id, name)
			}
		case "AWS::Lambda::Permission":
			if refName(get(res, "Properties", "FunctionName")) == "ChatStreamFunction" && get(res, "Properties", "Principal") == "apigateway.amazonaws.com" {
				permissions = append(permissions, get(res, "Properties", "SourceArn"))
			}
		}
	}
	if len(stages) != 1 || len(deployments) != 1 {
		t.Errorf("stages %v, deployments %v; want one each", stages, deployments)
	}
	perm := func(route string) any {
		return map[string]any{"Fn::Sub": []any{
			"arn:aws:execute-api:${AWS::Region}:${AWS::AccountId}:${__ApiId__}/${__Stage__}/" + route,
			map[string]any{"__ApiId__": ref(restAPI), "__Stage__": "*"},
		}}
	}
	wantPerms := []any{perm("POST" + restPath), perm("POST/a2a"), perm("GET/.well-known/agent-card.json")}
	if diff := cmp.Diff(wantPerms, permissions, cmpopts.SortSlices(func(a, b any) bool { return fmt.Sprint(a) < fmt.Sprint(b) })); diff != "" {
		t.Errorf("API Gateway's permissions on the stream function (-want +got):\n%s", diff)
	}

	if uri := sub(get(integration(transform(t, "STREAM")), "uri")); !strings.HasSuffix(uri, "/invocations") || strings.Contains(uri, "response-streaming") {
		t.Errorf("with STREAM in the event, the uri is %q: the check above no longer tells a buffered API from a streaming one", uri)
	}
}

// subVars resolves an Fn::Sub with its own variables, [template, {name:
// value}], as CloudFormation would: each variable's value first, then what
// subValue resolves.
func (r *resolver) subVars(t *testing.T, v any) string {
	t.Helper()
	args, _ := get(v, "Fn::Sub").([]any)
	if len(args) != 2 {
		return r.subValue(t, v)
	}
	s, _ := args[0].(string)
	vars, _ := args[1].(map[string]any)
	for name, x := range vars {
		val, err := r.value(x)
		if err != nil {
			t.Fatalf("Fn::Sub variable %s: %v", name, err)
		}
		s = strings.ReplaceAll(s, "${"+name+"}", val)
	}
	return r.subValue(t, map[string]any{"Fn::Sub": s})
}

// Package lambdahttp is the edge between Lambda and net/http: it serves an
// API Gateway HTTP API event (payload format 2.0) with an http.Handler, and
// turns what the handler writes into the event's response, as
// aws-lambda-go's lambdaurl does for function URLs. WrapURL serves function
// URL events through lambdaurl, with the raw paths it cannot parse escaped.
// WrapProxyStream serves a REST API's proxy events (payload format 1.0) and
// streams the answers, for a method whose integration streams; WrapStream
// serves both a function URL's events and a REST API's from one Lambda
// handler, telling them apart by their JSON.
//
// Everything behind it speaks plain net/http: the handler, the local run and
// the tests. This is the one place that reads HTTP events, so nothing else
// builds one by hand. (The REST API's Lambda authorizer reads its own
// events, which carry a token and no request, in internal/jwtauth.) The handler finds the event it serves with
// RequestFromContext, URLRequestFromContext or ProxyRequestFromContext, for
// what only API Gateway or Lambda knows, such as the authorizer's claims.
package lambdahttp

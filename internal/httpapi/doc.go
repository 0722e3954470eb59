// Package httpapi is the HTTP contract of the functions: one http.Handler, a
// ServeMux with method patterns, that decodes and checks requests, scopes
// sessions to the caller, calls the session service (internal/turn) for
// every use of a session, turns and the rest, encodes its answers within
// what the transport carries (see budget), and answers every failure with
// a 4xx or 5xx whose JSON body, {"error":{"code","message","details"?}},
// says what was wrong: unknown routes and wrong methods included. errorFor
// chooses the code of an error, and statusOf, the one place that does,
// the status of a code.
//
// It speaks plain net/http. The caller's identity, which API Gateway's
// authorizer or a function URL verified, reaches it through the request's
// context: internal/lambdahttp puts the event there, and the local run
// uses WithAuthorizer. Each function serves its own Routes.
//
// A change to the API's shape (a route, a field, a status code) goes here;
// a change to what a session does goes in internal/turn.
package httpapi

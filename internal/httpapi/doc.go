// Package httpapi is the HTTP contract of the functions: one http.Handler, a
// ServeMux with method patterns, that decodes and checks requests, scopes
// sessions to the caller, hands turns to the turn service (internal/turn),
// serves the session routes from the store, and answers every failure with
// a 4xx or 5xx whose JSON body, {"error":{"code","message","details"?}},
// says what was wrong: unknown routes and wrong methods included. Status
// codes are chosen in one place, errorFor.
//
// It speaks plain net/http. The caller's identity, which API Gateway's
// authorizer or a function URL verified, reaches it through the request's
// context: internal/lambdahttp and aws-lambda-go's lambdaurl put the event
// there, and the local run uses WithAuthorizer. Each function serves its own
// Routes.
//
// A change to the API's shape (a route, a field, a status code) goes here;
// a change to what a turn does goes in internal/turn.
package httpapi

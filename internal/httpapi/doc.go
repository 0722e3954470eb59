// Package httpapi is the HTTP contract of the chat and structured functions:
// API Gateway HTTP API requests (payload format 2.0) in, responses out. It
// decodes and checks requests, scopes sessions to the caller, runs turns with
// the agent, commits them to the store, and answers every failure with a 4xx
// or 5xx whose JSON body, {"error":{"code","message","details"?}}, says what
// was wrong. Status codes are chosen in one place, errorFor.
//
// It is tested without Lambda: the functions' main packages only wire it up.
package httpapi

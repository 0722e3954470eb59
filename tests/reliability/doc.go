// Package reliability holds the reliability suite: tests that inject what
// production brings (concurrent turns, crashes, faults, deadlines, hostile
// owners) and check that no turn is half-written, no message lost, and no
// session left unusable. Most of them send net/http requests to the handler
// as app.New wires it (internal/testkit), with faults on its DynamoDB
// client; the crash tests run the chat function built as a bootstrap
// (internal/testkit/runtimetest) and send it the sample event events/chat-new.json.
// RELIABILITY.md lists each guarantee, the test that proves it, and the
// last run's results, which
//
//	RELIABILITY_MD=RELIABILITY.md go test -count=1 ./tests/reliability
//
// writes into it.
package reliability

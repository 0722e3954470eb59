package testkit_test

import (
	"testing"

	"github.com/lambda-agent/lambda-agent/internal/testkit"
)

func TestEvent(t *testing.T) {
	ev, err := testkit.Event("chat-new.json")
	if err != nil {
		t.Fatal(err)
	}
	if ev.RouteKey != "POST /chat" {
		t.Errorf("RouteKey = %q, want POST /chat", ev.RouteKey)
	}
	if _, err := testkit.Event("no-such-event.json"); err == nil {
		t.Error("a missing event read without an error")
	}
}

func TestProxyEvent(t *testing.T) {
	ev, err := testkit.ProxyEvent("session-get-rest.json")
	if err != nil {
		t.Fatal(err)
	}
	if ev.Resource != "/sessions/{sessionId}" || ev.PathParameters["sessionId"] != "rest-session" {
		t.Errorf("Resource %q, PathParameters %v", ev.Resource, ev.PathParameters)
	}
	if _, err := testkit.ProxyEvent("no-such-event.json"); err == nil {
		t.Error("a missing event read without an error")
	}
}

func TestURLEvent(t *testing.T) {
	ev, err := testkit.URLEvent("stream-chat.json")
	if err != nil {
		t.Fatal(err)
	}
	if ev.RequestContext.HTTP.Method != "POST" || ev.RequestContext.Authorizer == nil || ev.RequestContext.Authorizer.IAM == nil {
		t.Errorf("the stream function's sample event reads as %+v, want a POST signed with IAM", ev.RequestContext)
	}
	if _, err := testkit.URLEvent("no-such-event.json"); err == nil {
		t.Error("a missing event read without an error")
	}
}

func TestStreamEvent(t *testing.T) {
	ev, err := testkit.StreamEvent("memory-stream.json")
	if err != nil {
		t.Fatal(err)
	}
	if len(ev.Records) != 1 || ev.Records[0].EventName != "MODIFY" || ev.Records[0].Change.OldImage == nil || ev.Records[0].Change.NewImage == nil {
		t.Errorf("the memory function's sample event reads as %+v, want one MODIFY with both images", ev.Records)
	}
	if _, err := testkit.StreamEvent("no-such-event.json"); err == nil {
		t.Error("a missing event read without an error")
	}
}

package functions_test

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// TestChatLinksNoSchemaCompiler guards the chat function's cold start: the
// schema compiler for callers' schemas compiles every JSON Schema draft's
// meta-schema when the program starts, a few milliseconds the chat function,
// which takes no schemas, must not pay.
func TestChatLinksNoSchemaCompiler(t *testing.T) {
	const compiler = "github.com/santhosh-tekuri/jsonschema/v6"
	deps := func(pkg string) []string {
		out, err := exec.Command("go", "list", "-deps", pkg).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", pkg, err)
		}
		return strings.Fields(string(out))
	}
	if !slices.Contains(deps("./structured"), compiler) {
		t.Fatalf("the structured function does not link %s: is the test looking for the right package?", compiler)
	}
	if slices.Contains(deps("./chat"), compiler) {
		t.Errorf("the chat function links %s; only the structured function should", compiler)
	}
}

// TestChatLinksNoSchemaSerdeForRemoteTools guards the chat function's cold
// start against the remote tools' clients: from lambda v1.109.0 and ssm
// v1.80.0 on, the SDK builds their operation schemas when the program
// starts, 1.8 ms of init that every chat function would pay, remote tools
// configured or not. go.mod keeps the last versions before them.
func TestChatLinksNoSchemaSerdeForRemoteTools(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "./chat").Output()
	if err != nil {
		t.Fatalf("go list -deps ./chat: %v", err)
	}
	deps := strings.Fields(string(out))
	if !slices.Contains(deps, "github.com/aws/aws-sdk-go-v2/service/lambda") {
		t.Fatal("the chat function does not link the Lambda client: is the test looking for the right package?")
	}
	for _, heavy := range []string{"github.com/aws/aws-sdk-go-v2/service/lambda/schemas", "github.com/aws/aws-sdk-go-v2/service/ssm/schemas"} {
		if slices.Contains(deps, heavy) {
			t.Errorf("the chat function links %s, whose init costs every cold start", heavy)
		}
	}
}

// TestFunctionsLinkNoProtobufRuntime guards every function's cold start
// against tracing: the official OTLP exporter links gRPC and the protobuf
// runtime, whose registries fill when the program starts, and adds
// megabytes to the binary, whether traces are exported or not.
// internal/telemetry writes OTLP's encoding itself.
func TestFunctionsLinkNoProtobufRuntime(t *testing.T) {
	for _, fn := range []string{"./chat", "./stream", "./structured", "./authorizer", "./memory"} {
		out, err := exec.Command("go", "list", "-deps", fn).Output()
		if err != nil {
			t.Fatalf("go list -deps %s: %v", fn, err)
		}
		deps := strings.Fields(string(out))
		if !slices.Contains(deps, "go.opentelemetry.io/otel/sdk/trace") {
			t.Fatalf("%s does not link the OpenTelemetry SDK: is the test looking for the right package?", fn)
		}
		for _, d := range deps {
			if strings.HasPrefix(d, "google.golang.org/protobuf/") || strings.HasPrefix(d, "google.golang.org/grpc") {
				t.Errorf("%s links %s", fn, d)
			}
		}
	}
}

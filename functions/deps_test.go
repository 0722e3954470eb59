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

package runtimetest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
)

// Build compiles the main package pkg into dir/bootstrap and returns the
// binary's absolute path. pkg is anything go build accepts: an import path,
// or a directory path relative to the current working directory, such as
// "./functions/chat".
//
// The flags are those of a SAM or Makefile build for the provided.al2023
// runtime: GOOS=linux, CGO_ENABLED=0, -tags lambda.norpc, -trimpath and
// -ldflags "-s -w". GOARCH is the host's, so the binary runs here. The rest
// of the environment (GOFLAGS, GOCACHE, …) is inherited, so repeated builds
// come from the build cache. dir is created if needed; a bootstrap already
// there is replaced. Extra build tags, such as a test's fault hooks, are
// added to lambda.norpc.
func Build(ctx context.Context, pkg, dir string, tags ...string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("runtimetest: build %s: %w", pkg, err)
	}
	out, err := filepath.Abs(filepath.Join(dir, "bootstrap"))
	if err != nil {
		return "", fmt.Errorf("runtimetest: build %s: %w", pkg, err)
	}
	cmd := exec.CommandContext(ctx, "go", "build",
		"-tags", strings.Join(append([]string{"lambda.norpc"}, tags...), ","),
		"-trimpath",
		"-ldflags", "-s -w",
		"-o", out,
		pkg,
	)
	cmd.Env = append(os.Environ(), "GOOS=linux", "GOARCH="+runtime.GOARCH, "CGO_ENABLED=0")
	if output, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("runtimetest: build %s: %w\n%s", pkg, err, strings.TrimSpace(string(output)))
	}
	return out, nil
}

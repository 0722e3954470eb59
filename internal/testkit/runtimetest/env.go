package runtimetest

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// defaultRegion is the region of the emulated sandbox unless Config.Env
// sets AWS_REGION or AWS_DEFAULT_REGION.
const defaultRegion = "us-east-1"

// accountID is the account of the function ARNs the emulator announces.
const accountID = "123456789012"

// lambdaEnv returns the process environment: what Lambda sets for a
// provided.al2023 function, then cfg.Env, whose entries win because
// os/exec keeps the last value of a duplicated name.
func lambdaEnv(cfg *Config, api, taskRoot string) []string {
	region := lookupEnv(cfg.Env, "AWS_REGION")
	if region == "" {
		region = lookupEnv(cfg.Env, "AWS_DEFAULT_REGION")
	}
	if region == "" {
		region = defaultRegion
	}
	env := []string{
		"AWS_LAMBDA_RUNTIME_API=" + api,
		"AWS_LAMBDA_FUNCTION_NAME=" + cfg.Name,
		"AWS_LAMBDA_FUNCTION_VERSION=$LATEST",
		"AWS_LAMBDA_FUNCTION_MEMORY_SIZE=" + strconv.Itoa(cfg.MemoryMB),
		"AWS_LAMBDA_INITIALIZATION_TYPE=on-demand",
		"AWS_LAMBDA_LOG_GROUP_NAME=/aws/lambda/" + cfg.Name,
		"AWS_LAMBDA_LOG_STREAM_NAME=" + time.Now().UTC().Format("2006/01/02") + "/[$LATEST]" + randomHex(16),
		"AWS_REGION=" + region,
		"AWS_DEFAULT_REGION=" + region,
		"_HANDLER=bootstrap",
		"LAMBDA_TASK_ROOT=" + taskRoot,
		"LAMBDA_RUNTIME_DIR=" + taskRoot,
		"LANG=en_US.UTF-8",
		"PATH=/usr/local/bin:/usr/bin/:/bin:/opt/bin",
		"TZ=:UTC",
	}
	return append(env, cfg.Env...)
}

// lookupEnv returns the last value of name in env, as os/exec would use it.
func lookupEnv(env []string, name string) string {
	value := ""
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok && k == name {
			value = v
		}
	}
	return value
}

// functionARN is the ARN the emulator announces for the function.
func functionARN(env []string, name string) string {
	region := lookupEnv(env, "AWS_REGION")
	return fmt.Sprintf("arn:aws:lambda:%s:%s:function:%s", region, accountID, name)
}

// newRequestID returns a random version 4 UUID, the form of Lambda's
// request ids.
func newRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]
}

// newTraceID returns an X-Ray trace header for one invocation, not sampled.
func newTraceID(now time.Time) string {
	return fmt.Sprintf("Root=1-%08x-%s;Parent=%s;Sampled=0", now.Unix(), randomHex(12), randomHex(8))
}

// randomHex returns n random bytes in hex.
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b) // never fails
	return hex.EncodeToString(b)
}

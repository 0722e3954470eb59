// Command local runs the API on a laptop, without an AWS account: the
// functions' four routes on 127.0.0.1:3000, an embedded DynamoDB, and Amazon
// Bedrock when AWS credentials are found or an offline model otherwise.
//
//	go run ./cmd/local
//	go run ./cmd/local -addr 127.0.0.1:8080 -offline
//	go run ./cmd/local -memory=false
//
// The functions' environment variables (MODEL_ID, CONVERSATION_MANAGER, ...)
// apply; AWS_ENDPOINT_URL_DYNAMODB and AWS_ENDPOINT_URL_BEDROCK_RUNTIME point
// it at other endpoints. Long-term memory is on, learned after each turn
// by the model the turns use; -memory=false turns it off.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/lambda-agent/lambda-agent/internal/devrun"
)

func main() {
	addr := flag.String("addr", devrun.DefaultAddr, "address to listen on")
	off := flag.Bool("offline", false, "use the offline model even when AWS credentials are found")
	var mcp endpoints
	flag.Var(&mcp, "mcp", "the URL of an MCP server (streamable HTTP) whose tools the agent may use; repeat for more")
	var a2a endpoints
	flag.Var(&a2a, "a2a", "the URL of a remote agent's A2A card (or its base URL) that the agent may call as a tool; repeat for more")
	otel := flag.String("otel", "", "an OTLP/HTTP endpoint, such as http://localhost:4318, to send traces to")
	mem := flag.Bool("memory", true, "long-term memory across sessions: learned after each turn, recalled in later ones, listed at GET /memory and on the chat page; -memory=false turns it off")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := devrun.Run(ctx, devrun.Options{Addr: *addr, Offline: *off, Getenv: os.Getenv, Out: os.Stderr, MCP: mcp, A2A: a2a, OTel: *otel, NoMemory: !*mem})
	if err != nil {
		fmt.Fprintln(os.Stderr, "local:", err)
		os.Exit(1)
	}
}

// endpoints collects the -mcp and -a2a flags.
type endpoints []string

func (e *endpoints) String() string { return strings.Join(*e, ",") }

func (e *endpoints) Set(v string) error {
	*e = append(*e, v)
	return nil
}

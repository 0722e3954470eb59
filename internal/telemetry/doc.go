// Package telemetry is what the functions tell their operators: a log line
// per request, CloudWatch metrics in the Embedded Metric Format, and
// OpenTelemetry traces that follow the semantic conventions for generative
// AI, exported over OTLP/HTTP.
//
// Each part costs nothing it does not use. Metrics are lines on stdout,
// with no agent and no extra call. Traces are off unless an OTLP endpoint
// is configured, and then the spans of an invocation are sent before it
// returns, since Lambda freezes the process between invocations and a
// span left in a buffer would wait there. The exporter writes OTLP's
// protobuf encoding itself: the official exporter links gRPC and the
// protobuf runtime, which would add megabytes and a millisecond to every
// cold start of a function that never exports a span.
package telemetry

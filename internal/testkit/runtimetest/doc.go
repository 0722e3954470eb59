// Package runtimetest runs a Go Lambda function the way Lambda does, without
// Docker: it builds the function into a real bootstrap binary ([Build]),
// starts that binary as a child process ([Start]) against an in-process
// emulator of the Lambda Runtime API, and invokes it with events
// ([Function.Invoke]). It is "sam local invoke" for tests, benchmarks and
// crash tests.
//
// It does not import package testing, so a benchmark binary can use it too.
// It is Linux-first: [Build] targets GOOS=linux, and [Function.PeakRSS]
// reads /proc. Unlike Lambda, it sets no limit on init time (bound it with
// the context of the first Invoke or of [Function.WaitReady]) and does not
// enforce the memory size.
//
// # Usage
//
//	bin, err := runtimetest.Build(ctx, "./functions/chat", dir)
//	fn, err := runtimetest.Start(ctx, bin, runtimetest.Config{
//		Env: []string{"TABLE_NAME=sessions"},
//	})
//	defer fn.Close()
//	out, err := fn.Invoke(ctx, event, 30*time.Second)
//	var ierr *runtimetest.InvokeError // the function returned an error or panicked
//	var xerr *runtimetest.ExitError   // the process died during the invocation
//	// errors.Is(err, runtimetest.ErrTimeout): the function overran its deadline
//
// # The sandbox
//
// A [Function] is one execution environment. The process gets a clean,
// minimal environment like Lambda's (the parent's environment is not
// inherited; see [Config.Env]) and its working directory is the directory of
// the binary (LAMBDA_TASK_ROOT). Its stdout and stderr are captured
// ([Function.Logs]) and can be copied to [Config.Output].
//
// One invocation runs at a time; concurrent Invoke calls queue. When an
// invocation overruns its deadline by more than [Config.TimeoutGrace], the
// process is killed, as Lambda does, and the invocation fails with
// [ErrTimeout]. A panic makes aws-lambda-go report the error and exit. In
// both cases, and after [Function.Kill], the Function stays dead (further
// invocations fail at once with an [*ExitError]) until [Function.Restart]
// starts a new process: restarts are explicit so that every cold start is
// one the caller asked for and can measure.
//
// # Runtime API
//
// The emulator speaks version 2018-06-01 on a loopback port
// ([Function.RuntimeAPI]), as aws-lambda-go v1.55 uses it:
//
//   - GET /2018-06-01/runtime/invocation/next long-polls for the next event
//     and answers 200 with the event and the headers
//     Lambda-Runtime-Aws-Request-Id, Lambda-Runtime-Deadline-Ms,
//     Lambda-Runtime-Invoked-Function-Arn and Lambda-Runtime-Trace-Id.
//   - POST /2018-06-01/runtime/invocation/{id}/response and .../{id}/error
//     answer 202. An id that is not the invocation in flight, or that was
//     already answered, gets 400 InvalidRequestID. A response larger than
//     [MaxResponseSize] gets 413 and fails the invocation. Error trailers
//     (Lambda-Runtime-Function-Error-Type and -Body, which aws-lambda-go
//     sends when reading the response fails, and streaming runtimes send on
//     a mid-stream error) turn a response into an [*InvokeError]. A
//     response with Lambda-Runtime-Function-Response-Mode: streaming is read
//     to its end and treated as buffered for now.
//   - POST /2018-06-01/runtime/init/error answers 202 and fails the pending
//     and next invocations with an [*InvokeError] whose Init is true; after
//     init it gets 403 InvalidStateTransition.
//   - POST /2020-01-01/extension/register and GET .../extension/event/next
//     are there for lambda.WithEnableSIGTERM: once the function registered,
//     Close and Restart send SIGTERM and wait [Config.ShutdownGrace] before
//     SIGKILL, as Lambda does. The event/next call blocks until shutdown.
//
// # Timing
//
// Timestamps come from the emulator, next to the events they stamp, so they
// do not include the caller's scheduling delays:
//
//   - [Function.StartedAt]: just before the process is forked and executed.
//     [Start] returns as soon as the exec has succeeded, without waiting for
//     init.
//   - [Function.ReadyAt] (and [Function.Ready], [Function.WaitReady]): when
//     the first GET .../invocation/next arrived, that is, when init ended.
//   - [Timing] of each [Invocation]: Queued when the emulator accepted the
//     event; Fetched when it handed the event to the runtime's /next
//     (Deadline is Fetched plus the timeout, in whole milliseconds, as in
//     the header); FirstByte when the first byte of the response or error
//     body arrived; Completed when its last byte arrived, or when the
//     failure was detected.
//
// A cold start, from process start to the first completed response, is
// therefore inv.Timing().Completed.Sub(fn.StartedAt()) for the first
// invocation after Start or Restart, and init alone is
// fn.ReadyAt().Sub(fn.StartedAt()). [Function.PeakRSS]
// gives the peak resident set size (VmHWM) while the process runs; after
// Close it gives the value read just before the kill, which covers the
// process's whole life.
package runtimetest

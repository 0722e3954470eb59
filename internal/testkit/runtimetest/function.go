package runtimetest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"sync"
	"time"
)

// Defaults of [Config].
const (
	// DefaultName is the function name when Config.Name is empty.
	DefaultName = "function"
	// DefaultMemoryMB is the memory size announced when Config.MemoryMB
	// is zero; Lambda's default.
	DefaultMemoryMB = 128
	// DefaultTimeoutGrace is Config.TimeoutGrace when it is zero.
	DefaultTimeoutGrace = 500 * time.Millisecond
	// DefaultShutdownGrace is Config.ShutdownGrace when it is zero; what
	// Lambda gives a function with internal extensions only.
	DefaultShutdownGrace = 500 * time.Millisecond
)

// Config describes the sandbox a [Function] runs in. The zero value is
// usable.
type Config struct {
	// Name is the function name (AWS_LAMBDA_FUNCTION_NAME, and the end of
	// the announced ARN). Default [DefaultName].
	Name string
	// MemoryMB is announced in AWS_LAMBDA_FUNCTION_MEMORY_SIZE; it is not
	// enforced. Default [DefaultMemoryMB].
	MemoryMB int
	// Env holds NAME=value entries added to the Lambda environment; an
	// entry wins over a default of the same name. The test's own
	// environment is not passed on, so credentials, endpoints and the like
	// must be given here. AWS_REGION (or AWS_DEFAULT_REGION) set here also
	// sets the other one and the region of the ARN; the default is
	// us-east-1.
	Env []string
	// Output, if not nil, receives a copy of the process's stdout and
	// stderr as they are written, from several goroutines but one write at
	// a time. Its errors are ignored.
	Output io.Writer
	// TimeoutGrace is how long after an invocation's deadline the emulator
	// waits for the answer before it kills the process and fails the
	// invocation with [ErrTimeout]. It leaves a function that honours its
	// context the time to report context.DeadlineExceeded. Default
	// [DefaultTimeoutGrace].
	TimeoutGrace time.Duration
	// ShutdownGrace is how long Close and Restart wait after SIGTERM before
	// SIGKILL, when the function registered an extension. Default
	// [DefaultShutdownGrace]; negative means SIGKILL at once.
	ShutdownGrace time.Duration
}

// withDefaults returns c with the defaults filled in.
func (c Config) withDefaults() (Config, error) {
	if c.Name == "" {
		c.Name = DefaultName
	}
	if c.MemoryMB == 0 {
		c.MemoryMB = DefaultMemoryMB
	}
	if c.TimeoutGrace == 0 {
		c.TimeoutGrace = DefaultTimeoutGrace
	}
	if c.ShutdownGrace == 0 {
		c.ShutdownGrace = DefaultShutdownGrace
	}
	switch {
	case c.MemoryMB < 0:
		return c, fmt.Errorf("MemoryMB %d is negative", c.MemoryMB)
	case c.TimeoutGrace < 0:
		return c, fmt.Errorf("TimeoutGrace %s is negative", c.TimeoutGrace)
	}
	c.Env = append([]string(nil), c.Env...)
	return c, nil
}

// Function is a Lambda function running in an emulated sandbox: one
// bootstrap process at a time and the Runtime API server it talks to. Its
// methods are safe for concurrent use.
//
// Methods about the process (Pid, StartedAt, Ready, Exited, PeakRSS, …)
// are about the current one: after [Function.Restart], the new one.
type Function struct {
	bin  string
	cfg  Config
	logs *logBuffer
	slot chan struct{} // holds a token while an invocation runs

	mu     sync.Mutex
	sb     *sandbox
	closed bool
}

// Start starts the bootstrap binary bin with the Lambda environment and
// cfg, and returns as soon as the process is executing: init goes on in
// the background (see [Function.WaitReady]). ctx only bounds the start.
// Call Close when done.
func Start(ctx context.Context, bin string, cfg Config) (*Function, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("runtimetest: start %s: %w", bin, context.Cause(ctx))
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, fmt.Errorf("runtimetest: start %s: %w", bin, err)
	}
	abs, err := filepath.Abs(bin)
	if err != nil {
		return nil, fmt.Errorf("runtimetest: start %s: %w", bin, err)
	}
	f := &Function{
		bin:  abs,
		cfg:  cfg,
		logs: &logBuffer{out: cfg.Output},
		slot: make(chan struct{}, 1),
	}
	if f.sb, err = startSandbox(f.bin, &f.cfg, f.logs); err != nil {
		return nil, err
	}
	return f, nil
}

// current returns the current sandbox.
func (f *Function) current() *sandbox {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.sb
}

// Invoke sends event (JSON; empty means {}) to the function and waits for
// its response body. The function's context has a deadline timeout after
// the runtime fetched the event; if no answer comes by timeout plus
// [Config.TimeoutGrace], the process is killed and Invoke fails with
// [ErrTimeout].
//
// A function error is an [*InvokeError]; a process that died (or was dead
// already) is an [*ExitError]. ctx bounds the wait: see
// [Function.InvokeAsync] and [Invocation.Wait] for what happens to the
// invocation when ctx ends first.
func (f *Function) Invoke(ctx context.Context, event []byte, timeout time.Duration) ([]byte, error) {
	inv, err := f.InvokeAsync(ctx, event, timeout)
	if err != nil {
		return nil, err
	}
	return inv.Wait(ctx)
}

// InvokeAsync queues event and returns at once with its [Invocation], to
// act while it runs: wait on [Invocation.Fetched], then kill the process,
// say. Invocations run one at a time, in the order their InvokeAsync calls
// got past the previous one; InvokeAsync waits (bounded by ctx) while
// another one runs.
//
// ctx bounds the wait for a turn and then the wait for the runtime to fetch
// the event: if it ends first, the invocation is withdrawn and fails with
// its cause. Once fetched, the invocation is no longer bound by ctx.
func (f *Function) InvokeAsync(ctx context.Context, event []byte, timeout time.Duration) (*Invocation, error) {
	if timeout <= 0 {
		return nil, fmt.Errorf("runtimetest: invoke: timeout %s is not positive", timeout)
	}
	if len(event) == 0 {
		event = []byte("{}")
	}
	select {
	case f.slot <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("runtimetest: invoke: %w", context.Cause(ctx))
	}
	f.mu.Lock()
	sb, closed := f.sb, f.closed
	f.mu.Unlock()
	if closed {
		<-f.slot
		return nil, ErrClosed
	}
	inv := newInvocation(append([]byte(nil), event...), timeout, func() { <-f.slot })
	go sb.dispatch(ctx, inv)
	return inv, nil
}

// Kill sends SIGKILL to the process, as Lambda does when it tears a sandbox
// down, and waits until it is reaped. An invocation in flight fails with an
// [*ExitError] at once, and so do later ones until [Function.Restart]. It
// does nothing if the process has exited already.
func (f *Function) Kill() error {
	return f.current().kill()
}

// Restart ends the current process as Close does and starts a new one,
// with a new Runtime API server: a new cold start. An invocation in flight
// fails with an [*ExitError]. ctx only bounds the start.
func (f *Function) Restart(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("runtimetest: restart %s: %w", f.bin, context.Cause(ctx))
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return ErrClosed
	}
	if err := f.sb.shutdown(); err != nil {
		return err
	}
	sb, err := startSandbox(f.bin, &f.cfg, f.logs)
	if err != nil {
		return err
	}
	f.sb = sb
	return nil
}

// Close ends the process (SIGTERM and [Config.ShutdownGrace] first if it
// registered an extension, then SIGKILL), waits until it is reaped, and
// closes the Runtime API server. An invocation in flight fails with an
// [*ExitError]. Logs, Exit and PeakRSS still work afterwards. Calling Close
// again does nothing.
func (f *Function) Close() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return nil
	}
	f.closed = true
	return f.sb.shutdown()
}

// Logs returns what the function's processes wrote to stdout and stderr so
// far, interleaved as it arrived, across restarts. Past 8 MiB the oldest
// output is dropped.
func (f *Function) Logs() string {
	return f.logs.String()
}

// RuntimeAPI returns the host:port of the Runtime API server, the value of
// AWS_LAMBDA_RUNTIME_API.
func (f *Function) RuntimeAPI() string {
	return f.current().addr
}

// Pid returns the process id.
func (f *Function) Pid() int {
	return f.current().pid
}

// StartedAt returns the instant just before the process was forked and
// executed: the start of a cold start.
func (f *Function) StartedAt() time.Time {
	return f.current().startedAt
}

// Ready returns a channel that is closed once init has ended, that is,
// when the runtime first asked for an event (GET .../invocation/next).
func (f *Function) Ready() <-chan struct{} {
	return f.current().ready
}

// ReadyAt returns when init ended (see Ready), or the zero time before.
func (f *Function) ReadyAt() time.Time {
	sb := f.current()
	select {
	case <-sb.ready:
		return sb.readyAt
	default:
		return time.Time{}
	}
}

// WaitReady waits until init has ended and returns when it did. It fails
// if the runtime reports an init error, if the process exits first, or if
// ctx ends first.
func (f *Function) WaitReady(ctx context.Context) (time.Time, error) {
	sb := f.current()
	select {
	case <-sb.ready:
		return sb.readyAt, nil
	case <-sb.initFailed:
	case <-sb.exited:
	case <-sb.closing:
	case <-ctx.Done():
		return time.Time{}, fmt.Errorf("runtimetest: wait for init: %w", context.Cause(ctx))
	}
	select {
	case <-sb.ready: // it got there after all
		return sb.readyAt, nil
	default:
		return time.Time{}, fmt.Errorf("runtimetest: wait for init: %w", sb.unusable(""))
	}
}

// Exited returns a channel that is closed once the process has ended and
// been reaped.
func (f *Function) Exited() <-chan struct{} {
	return f.current().exited
}

// Exit returns how the process ended, or nil while it runs.
func (f *Function) Exit() *ExitError {
	sb := f.current()
	select {
	case <-sb.exited:
		return sb.exit
	default:
		return nil
	}
}

// PeakRSS returns the peak resident set size of the process in bytes, its
// VmHWM from /proc/<pid>/status: the process alone, not children it
// started. Once the process has exited, it returns the last value read,
// when PeakRSS was last called or when runtimetest killed the process (Kill,
// Close, Restart, a timeout), so that "invoke, Close, PeakRSS" measures the
// whole life; a process that exited by itself before any reading has none,
// and PeakRSS fails. (The kernel's ru_maxrss for the child is no use: a
// child forked from a large parent reports the parent's peak.) Only Linux
// is supported; elsewhere the error wraps errors.ErrUnsupported.
func (f *Function) PeakRSS() (int64, error) {
	sb := f.current()
	if n, err := sb.samplePeakRSS(); err == nil || errors.Is(err, errors.ErrUnsupported) {
		return n, err
	}
	if n := sb.peakRSS.Load(); n > 0 {
		return n, nil
	}
	return 0, fmt.Errorf("runtimetest: peak RSS of process %d: exited before it was read", sb.pid)
}

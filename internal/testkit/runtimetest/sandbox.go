package runtimetest

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// MaxResponseSize is the largest response body the emulator accepts, the
// limit of a synchronous Lambda invocation (6 MB).
const MaxResponseSize = 6 * 1024 * 1024

// maxErrorSize bounds the error bodies the emulator reads.
const maxErrorSize = 1 << 20

// reapTimeout bounds how long the emulator waits for a killed process to be
// reaped; it only matters if the kernel misbehaves.
const reapTimeout = 10 * time.Second

// Runtime API names, as aws-lambda-go and the Lambda documentation spell
// them.
const (
	headerRequestID     = "Lambda-Runtime-Aws-Request-Id"
	headerDeadlineMS    = "Lambda-Runtime-Deadline-Ms"
	headerFunctionARN   = "Lambda-Runtime-Invoked-Function-Arn"
	headerTraceID       = "Lambda-Runtime-Trace-Id"
	headerErrorType     = "Lambda-Runtime-Function-Error-Type"
	headerErrorBody     = "Lambda-Runtime-Function-Error-Body"
	headerExtensionName = "Lambda-Extension-Name"
	headerExtensionID   = "Lambda-Extension-Identifier"
)

// sandbox is one process of a Function and the Runtime API server it talks
// to. A restart makes a new sandbox, on a new port, so that nothing an old
// process sent can reach the new one.
type sandbox struct {
	cfg       *Config
	cmd       *exec.Cmd
	pid       int
	arn       string
	addr      string // host:port of the Runtime API
	srv       *http.Server
	stderr    *tail
	startedAt time.Time

	queue chan *Invocation // unbuffered: a send is the hand-off to GET /next

	ready     chan struct{} // closed at the first GET /next
	readyOnce sync.Once
	readyAt   time.Time // set before ready is closed

	initFailed chan struct{} // closed when the runtime reports an init error
	initOnce   sync.Once
	initErr    *InvokeError // set before initFailed is closed

	exited chan struct{} // closed once the process is reaped
	exit   *ExitError    // set before exited is closed

	closing   chan struct{} // closed by shutdown, releasing long polls
	closeOnce sync.Once
	closeErr  error

	killed     atomic.Bool  // the emulator sent SIGTERM or SIGKILL
	peakRSS    atomic.Int64 // the last VmHWM read, in bytes
	extensions atomic.Int32 // registered extensions: SIGTERM before SIGKILL

	mu      sync.Mutex
	dead    bool        // the process was reaped
	current *Invocation // fetched by the runtime and not finished
}

// startSandbox starts the Runtime API server, then the process.
func startSandbox(bin string, cfg *Config, logs *logBuffer) (*sandbox, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("runtimetest: start %s: listen: %w", bin, err)
	}
	sb := &sandbox{
		cfg:        cfg,
		addr:       ln.Addr().String(),
		stderr:     &tail{},
		queue:      make(chan *Invocation),
		ready:      make(chan struct{}),
		initFailed: make(chan struct{}),
		exited:     make(chan struct{}),
		closing:    make(chan struct{}),
	}
	sb.srv = &http.Server{
		Handler:           sb.routes(),
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          log.New(io.Discard, "", 0), // dying runtimes break connections; that is reported otherwise
	}
	go sb.srv.Serve(ln) // returns ErrServerClosed at shutdown

	taskRoot := filepath.Dir(bin)
	cmd := exec.Command(bin)
	cmd.Dir = taskRoot
	cmd.Env = lambdaEnv(cfg, sb.addr, taskRoot)
	cmd.Stdout = logs.writer(nil)
	cmd.Stderr = logs.writer(sb.stderr)
	cmd.WaitDelay = time.Second // a grandchild holding the pipes must not delay the exit report
	setProcAttr(cmd)
	sb.cmd = cmd
	sb.arn = functionARN(cmd.Env, cfg.Name)

	sb.startedAt = time.Now()
	if err := cmd.Start(); err != nil {
		sb.srv.Close()
		return nil, fmt.Errorf("runtimetest: start %s: %w", bin, err)
	}
	sb.pid = cmd.Process.Pid
	go sb.reap()
	return sb, nil
}

// reap waits for the process to end and fails the invocation in flight.
func (sb *sandbox) reap() {
	_ = sb.cmd.Wait() // the state says it all; I/O errors do not matter
	sb.exit = &ExitError{
		Pid:    sb.pid,
		State:  sb.cmd.ProcessState,
		Killed: sb.killed.Load(),
		Stderr: sb.stderr.lastLines(stderrTailLines),
	}
	sb.mu.Lock()
	sb.dead = true
	cur := sb.current
	sb.current = nil
	sb.mu.Unlock()
	close(sb.exited)
	if cur != nil {
		err := sb.unusable(cur.id)
		if cur.expired.Load() {
			err = cur.timeoutError()
		}
		cur.finish(nil, err, time.Now())
	}
}

// unusable is the error of invocation id when this sandbox cannot run it:
// the init error if the runtime reported one (served to that invocation,
// as Lambda does), else how the process exited, else ErrClosed. Call it
// once initFailed, exited or closing is closed.
func (sb *sandbox) unusable(id string) error {
	select {
	case <-sb.initFailed:
		served := *sb.initErr
		served.RequestID = id
		return &served
	default:
	}
	select {
	case <-sb.exited:
		return sb.exit
	default:
		return ErrClosed
	}
}

// dispatch hands inv to the runtime's next GET /next, or fails it if the
// sandbox cannot run it or ctx ends first.
func (sb *sandbox) dispatch(ctx context.Context, inv *Invocation) {
	select {
	case <-sb.initFailed:
	case <-sb.exited:
	default:
		select {
		case sb.queue <- inv:
			return
		case <-ctx.Done():
			inv.finish(nil, context.Cause(ctx), time.Now())
			return
		case <-sb.initFailed:
		case <-sb.exited:
		case <-sb.closing:
		}
	}
	inv.finish(nil, sb.unusable(inv.id), time.Now())
}

// expire is the watchdog of inv: the function overran its deadline, so its
// process is killed and the invocation fails with ErrTimeout.
func (sb *sandbox) expire(inv *Invocation) {
	inv.expired.Store(true)
	if inv.isFinished() {
		return
	}
	_ = sb.kill() // its error, if any, leaves the process to reap
	inv.finish(nil, inv.timeoutError(), time.Now())
}

// kill sends SIGKILL and waits until the process is reaped.
func (sb *sandbox) kill() error {
	select {
	case <-sb.exited:
		return nil
	default:
	}
	sb.killed.Store(true)
	_, _ = sb.samplePeakRSS() // the last chance
	// os.Process tracks the child (a pidfd on Linux), so this never hits a
	// recycled pid.
	if err := sb.cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("runtimetest: kill process %d: %w", sb.pid, err)
	}
	return sb.waitExit(reapTimeout)
}

// samplePeakRSS reads the process's VmHWM and keeps it for after its
// exit. It fails once the process has exited.
func (sb *sandbox) samplePeakRSS() (int64, error) {
	select {
	case <-sb.exited:
		return 0, fmt.Errorf("runtimetest: peak RSS of process %d: %w", sb.pid, os.ErrProcessDone)
	default:
	}
	n, err := runningPeakRSS(sb.pid)
	if err != nil {
		return 0, fmt.Errorf("runtimetest: peak RSS of process %d: %w", sb.pid, err)
	}
	sb.peakRSS.Store(n)
	return n, nil
}

// waitExit waits up to d for the process to be reaped.
func (sb *sandbox) waitExit(d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-sb.exited:
		return nil
	case <-t.C:
		return fmt.Errorf("runtimetest: process %d not reaped after %s", sb.pid, d)
	}
}

// shutdown ends the sandbox: SIGTERM first if the function registered an
// extension (it asked for one with lambda.WithEnableSIGTERM), then SIGKILL,
// then the server. It is safe to call more than once.
func (sb *sandbox) shutdown() error {
	sb.closeOnce.Do(func() {
		if sb.extensions.Load() > 0 && sb.cfg.ShutdownGrace > 0 {
			select {
			case <-sb.exited:
			default:
				_, _ = sb.samplePeakRSS() // before the SIGTERM handlers run
				sb.killed.Store(true)
				if err := sb.cmd.Process.Signal(syscall.SIGTERM); err == nil {
					_ = sb.waitExit(sb.cfg.ShutdownGrace) // a timeout here means SIGKILL
				}
			}
		}
		sb.closeErr = sb.kill()
		close(sb.closing)
		if err := sb.srv.Close(); err != nil && sb.closeErr == nil {
			sb.closeErr = fmt.Errorf("runtimetest: close runtime API: %w", err)
		}
	})
	return sb.closeErr
}

// markReady records the end of init, at the first GET /next.
func (sb *sandbox) markReady(at time.Time) {
	sb.readyOnce.Do(func() {
		sb.readyAt = at
		close(sb.ready)
	})
}

// isReady reports whether init has ended.
func (sb *sandbox) isReady() bool {
	select {
	case <-sb.ready:
		return true
	default:
		return false
	}
}

// routes returns the Runtime API and the part of the Extensions API that
// aws-lambda-go uses.
func (sb *sandbox) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /2018-06-01/runtime/invocation/next", sb.handleNext)
	mux.HandleFunc("POST /2018-06-01/runtime/invocation/{id}/response", sb.handleResponse)
	mux.HandleFunc("POST /2018-06-01/runtime/invocation/{id}/error", sb.handleError)
	mux.HandleFunc("POST /2018-06-01/runtime/init/error", sb.handleInitError)
	mux.HandleFunc("POST /2020-01-01/extension/register", sb.handleRegister)
	mux.HandleFunc("GET /2020-01-01/extension/event/next", sb.handleExtensionNext)
	return mux
}

// handleNext long-polls for the next invocation and hands it over.
func (sb *sandbox) handleNext(w http.ResponseWriter, r *http.Request) {
	sb.markReady(time.Now())
	var inv *Invocation
	select {
	case inv = <-sb.queue:
	case <-r.Context().Done():
		return
	case <-sb.closing:
		return
	}

	now := time.Now()
	deadlineMS := now.Add(inv.timeout).UnixMilli()
	deadline := time.UnixMilli(deadlineMS)
	sb.mu.Lock()
	if sb.dead {
		sb.mu.Unlock()
		inv.finish(nil, sb.unusable(inv.id), now)
		return
	}
	sb.current = inv
	sb.mu.Unlock()
	inv.markFetched(now, deadline, sb.cfg.TimeoutGrace, func() { sb.expire(inv) })

	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set(headerRequestID, inv.id)
	h.Set(headerDeadlineMS, strconv.FormatInt(deadlineMS, 10))
	h.Set(headerFunctionARN, sb.arn)
	h.Set(headerTraceID, newTraceID(now))
	h.Set("Content-Length", strconv.Itoa(len(inv.event)))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(inv.event) // if the runtime is gone, reap reports it
}

// claim returns the invocation in flight if id is its request id and it
// was not answered yet, and marks it answered.
func (sb *sandbox) claim(id string) (*Invocation, bool) {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	inv := sb.current
	if inv == nil || inv.id != id || inv.answered {
		return nil, false
	}
	inv.answered = true
	return inv, true
}

// settle sets the result of a claimed invocation and lets the next one in.
func (sb *sandbox) settle(inv *Invocation, resp []byte, err error, at time.Time) {
	sb.mu.Lock()
	if sb.current == inv {
		sb.current = nil
	}
	sb.mu.Unlock()
	inv.finish(resp, err, at)
}

// handleResponse takes the function's response. A streamed response
// (Lambda-Runtime-Function-Response-Mode: streaming, chunked, with error
// trailers) is read to its end and kept whole like a buffered one; passing
// its chunks on as they come would hook into the readBody loop.
func (sb *sandbox) handleResponse(w http.ResponseWriter, r *http.Request) {
	inv, ok := sb.claim(r.PathValue("id"))
	if !ok {
		writeAPIError(w, http.StatusBadRequest, "InvalidRequestID", "Invalid request ID")
		return
	}
	body, err := readBody(r.Body, MaxResponseSize, inv.markFirstByte)
	now := time.Now()
	switch {
	case errors.Is(err, errTooLarge):
		sb.settle(inv, nil, &InvokeError{
			RequestID: inv.id,
			Type:      "Function.ResponseSizeTooLarge",
			Message:   fmt.Sprintf("response payload size exceeded maximum allowed payload size (%d bytes)", MaxResponseSize),
		}, now)
		writeAPIError(w, http.StatusRequestEntityTooLarge, "RequestEntityTooLarge",
			fmt.Sprintf("Exceeded maximum allowed payload size (%d bytes).", MaxResponseSize))
		return
	case err != nil:
		// The runtime broke off, most likely because its process died:
		// reap reports that, or the watchdog ends the invocation.
		return
	}
	if errType := r.Trailer.Get(headerErrorType); errType != "" {
		// The runtime failed after it had started the body.
		payload, decodeErr := base64.StdEncoding.DecodeString(r.Trailer.Get(headerErrorBody))
		if decodeErr != nil {
			payload = nil
		}
		sb.settle(inv, nil, newInvokeError(inv.id, payload, errType), now)
	} else {
		sb.settle(inv, body, nil, now)
	}
	writeAccepted(w)
}

// handleError takes the function's error report.
func (sb *sandbox) handleError(w http.ResponseWriter, r *http.Request) {
	inv, ok := sb.claim(r.PathValue("id"))
	if !ok {
		writeAPIError(w, http.StatusBadRequest, "InvalidRequestID", "Invalid request ID")
		return
	}
	body, err := readBody(r.Body, maxErrorSize, inv.markFirstByte)
	now := time.Now()
	if err != nil && !errors.Is(err, errTooLarge) {
		return // as in handleResponse
	}
	sb.settle(inv, nil, newInvokeError(inv.id, body, r.Header.Get(headerErrorType)), now)
	writeAccepted(w)
}

// handleInitError takes an init failure. The runtime is expected to exit
// next; the error is served to the invocations.
func (sb *sandbox) handleInitError(w http.ResponseWriter, r *http.Request) {
	if sb.isReady() {
		writeAPIError(w, http.StatusForbidden, "InvalidStateTransition", "init error reported after init")
		return
	}
	body, err := readBody(r.Body, maxErrorSize, nil)
	if err != nil && !errors.Is(err, errTooLarge) {
		return
	}
	ierr := newInvokeError("", body, r.Header.Get(headerErrorType))
	ierr.Init = true
	sb.initOnce.Do(func() {
		sb.initErr = ierr
		close(sb.initFailed)
	})
	writeAccepted(w)
}

// handleRegister registers an extension; aws-lambda-go registers an
// internal one, with no events, to have SIGTERM sent at shutdown.
func (sb *sandbox) handleRegister(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get(headerExtensionName) == "" {
		writeAPIError(w, http.StatusBadRequest, "InvalidRequest", "missing "+headerExtensionName)
		return
	}
	if sb.isReady() {
		writeAPIError(w, http.StatusForbidden, "InvalidStateTransition", "extension registered after init")
		return
	}
	_, _ = io.Copy(io.Discard, r.Body)
	sb.extensions.Add(1)
	w.Header().Set(headerExtensionID, newRequestID())
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]string{
		"functionName":    sb.cfg.Name,
		"functionVersion": "$LATEST",
		"handler":         "bootstrap",
	})
}

// handleExtensionNext blocks until shutdown: the emulator sends extensions
// no events.
func (sb *sandbox) handleExtensionNext(w http.ResponseWriter, r *http.Request) {
	select {
	case <-r.Context().Done():
	case <-sb.closing:
	}
}

// errTooLarge reports a body over the limit given to readBody.
var errTooLarge = errors.New("body too large")

// readBody reads r to its end, calling first (if not nil) at the first
// byte. Past limit bytes it stops with errTooLarge and the bytes so far.
func readBody(r io.Reader, limit int, first func(time.Time)) ([]byte, error) {
	var buf bytes.Buffer
	chunk := make([]byte, 32<<10)
	for {
		n, err := r.Read(chunk)
		if n > 0 {
			if buf.Len() == 0 && first != nil {
				first(time.Now())
			}
			if buf.Len()+n > limit {
				return buf.Bytes(), errTooLarge
			}
			buf.Write(chunk[:n])
		}
		if err == io.EOF {
			return buf.Bytes(), nil
		}
		if err != nil {
			return buf.Bytes(), err
		}
	}
}

// writeAccepted answers a POST the way the Runtime API does.
func writeAccepted(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusAccepted)
	_, _ = io.WriteString(w, `{"status":"OK"}`)
}

// writeAPIError answers with the Runtime API's error document.
func writeAPIError(w http.ResponseWriter, status int, errType, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]string{"errorMessage": msg, "errorType": errType})
}

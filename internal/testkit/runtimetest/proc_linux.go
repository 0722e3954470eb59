package runtimetest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"syscall"
)

// setProcAttr makes the kernel kill the function if this process dies, so
// that a crashed test or benchmark leaves no bootstrap behind. (The signal
// is tied to the OS thread that forked; Go only ends threads that a
// goroutine locked and did not unlock, which nothing here does.)
func setProcAttr(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// runningPeakRSS returns VmHWM from /proc/<pid>/status, in bytes. It fails
// for a process that has exited, even before it is reaped: a zombie has no
// VmHWM.
func runningPeakRSS(pid int) (int64, error) {
	status, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		value, ok := bytes.CutPrefix(sc.Bytes(), []byte("VmHWM:"))
		if !ok {
			continue
		}
		kb, ok := bytes.CutSuffix(bytes.TrimSpace(value), []byte(" kB"))
		if !ok {
			return 0, fmt.Errorf("parse VmHWM %q", value)
		}
		n, err := strconv.ParseInt(string(bytes.TrimSpace(kb)), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("parse VmHWM: %w", err)
		}
		return n * 1024, nil
	}
	return 0, errors.New("no VmHWM in /proc status")
}

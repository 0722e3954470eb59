//go:build !linux

package runtimetest

import (
	"errors"
	"os/exec"
)

// setProcAttr does nothing: only Linux can tie the child's life to ours.
func setProcAttr(*exec.Cmd) {}

// runningPeakRSS is only implemented for Linux.
func runningPeakRSS(int) (int64, error) {
	return 0, errors.ErrUnsupported
}

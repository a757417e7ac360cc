//go:build !linux

package servertest

import "os/exec"

// dieWithParent is a no-op where there is no parent-death signal.
func dieWithParent(*exec.Cmd) {}

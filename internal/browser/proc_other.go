//go:build !linux

package browser

import "os/exec"

// ownGroup does nothing here: the tests that drive Chromium run on Linux.
func ownGroup(*exec.Cmd) {}

// killGroup kills Chromium (its helpers end when it does).
func killGroup(cmd *exec.Cmd) { cmd.Process.Kill() }

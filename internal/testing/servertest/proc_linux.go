package servertest

import (
	"os/exec"
	"syscall"
)

// dieWithParent makes the kernel kill cmd's process if the test binary dies
// before its cleanup could.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

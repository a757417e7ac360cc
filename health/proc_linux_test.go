package health

import (
	"os/exec"
	"syscall"
)

// dieWithTest makes the kernel kill cmd's process if the test binary dies
// before its cleanup could.
func dieWithTest(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

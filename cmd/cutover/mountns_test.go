package main

import (
	"errors"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
)

// mountNSEnv marks the test binary that runs in a mount namespace of its own.
const mountNSEnv = "CUTOVER_TEST_MOUNTNS"

// runApart runs the tests again in a child of this process, apart: in a mount namespace of its
// own with all of its mounts private, and at a lower priority. It returns the child's exit
// code; ok is false where that cannot be done (not root, or no permission to unshare), and the
// caller runs the tests itself.
//
// The power-cut mode mounts a file system per crash point and must unmount it and mount it
// again at the power cut. Mounted in the machine's own namespace, every container that starts
// meanwhile (the container tests run beside this one) copies the mount into its namespace,
// and the device stays busy until that copy is let go, which on a loaded machine has taken
// longer than any bound the test could wait. In a namespace of the test's own, no one else
// sees the mounts; cutover, its commands and the test's sshd are children and see them.
func runApart() (code int, ok bool) {
	if os.Geteuid() != 0 || os.Getenv(mountNSEnv) == "1" {
		return 0, false
	}
	self, err := os.Executable()
	if err != nil {
		return 0, false
	}
	// The crash points are work for the CPU, and the container tests beside them wait on
	// real timeouts (Ganeti gives a node daemon 10 s to answer, its RPCs 5 s for a TLS
	// handshake). With cgroup v1, every container together weighs as much as one of this
	// test's processes at the default priority, so a dozen crash points at once starved them
	// all: the test runs at a lower priority (nice 10), and takes what the others leave.
	argv := append([]string{self}, os.Args[1:]...)
	if nice, err := exec.LookPath("nice"); err == nil {
		argv = append([]string{nice, "-n", "10"}, argv...)
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), mountNSEnv+"=1")
	// Go makes every mount of the new namespace private (MS_REC|MS_PRIVATE on /).
	cmd.SysProcAttr = &syscall.SysProcAttr{Unshareflags: syscall.CLONE_NEWNS, Pdeathsig: syscall.SIGKILL}
	signals := make(chan os.Signal, 4)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGQUIT)
	if err := cmd.Start(); err != nil {
		signal.Stop(signals)
		return 0, false
	}
	go func() {
		for s := range signals {
			_ = cmd.Process.Signal(s)
		}
	}()
	err = cmd.Wait()
	signal.Stop(signals)
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		if exit.ExitCode() < 0 {
			return 1, true // killed by a signal
		}
		return exit.ExitCode(), true
	}
	if err != nil {
		return 1, true
	}
	return 0, true
}

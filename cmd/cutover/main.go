// Command cutover switches every node of a cluster from one installed version of an
// application to another, journaled so that a crash or a reboot never strands the cluster.
//
// Output rules: results go to stdout; errors go to stderr as one line, lower case, prefixed
// "cutover: ", naming the node and the operation, with a hint when there is an obvious next
// step. Exit codes are decided in one place, exitCode.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/cutover/cutover/journal"
	"github.com/cutover/cutover/upgrade"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// The exit codes of cutover, documented in --help and docs/.
const (
	exitOK         = 0 // done
	exitFailed     = 1 // failed and rolled back, or a check refused: the cluster is as before
	exitUsage      = 2 // usage or bad input: nothing touched
	exitPastPONR   = 3 // failed past the point of no return: --resume or the operator
	exitLocked     = 4 // another run holds the lock
	exitNotMaster  = 5 // not the master
	exitRolledBack = 6 // failed past the point of no return, then taken back to the source ([policy] on_failure = "rollback")
)

func main() {
	os.Exit(run(context.Background(), os.Args, os.Stdin, os.Stdout, os.Stderr))
}

// run runs the command line args and returns the exit code.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	stdout, stderr = termSafe{stdout}, termSafe{stderr}
	app := newApp(stdin, stdout, stderr)
	err := app.RunContext(ctx, args)
	if err != nil {
		fmt.Fprintf(stderr, "cutover: %v\n", err)
	}
	return exitCode(err)
}

// exitCode maps an error to cutover's exit code: the one place that does.
func exitCode(err error) int {
	var ec cli.ExitCoder
	switch {
	case err == nil:
		return exitOK
	case upgrade.IsBadInput(err), isUsage(err):
		return exitUsage
	case upgrade.IsNotMaster(err):
		return exitNotMaster
	case journal.IsLocked(err):
		return exitLocked
	case upgrade.IsRolledBack(err):
		return exitRolledBack
	case upgrade.IsPastPONR(err):
		return exitPastPONR
	case errors.As(err, &ec):
		return ec.ExitCode()
	}
	return exitFailed
}

// usageError is a mistake on the command line.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

func isUsage(err error) bool {
	var u usageError
	return errors.As(err, &u)
}

package nodes

import (
	"context"
	"fmt"
	"io"
	"strings"
)

// RunInput runs argv on the node (quoted with QuoteArgs, run by sh) with
// input as its standard input, followed by end of file, and returns like
// Run. Unlike Run, the command does not run under the watchdog, which needs
// standard input for itself: it must be one that ends by itself once its
// input ends, as `tar -x` and `cat` do. When cutover dies, or ctx or the
// command timeout ends, the input ends and the command is expected to give
// up. Locally the watchdog runs it all the same, with its pipe as descriptor
// 3, so there its whole process group is killed then, as Run's commands are.
// An error reading input ends the input the same way. A nil input is an empty one.
func (c *Conn) RunInput(ctx context.Context, input io.Reader, argv ...string) (Result, error) {
	if len(argv) == 0 {
		return Result{Node: c.name, ExitCode: -1}, fmt.Errorf("%s: run: no command given", c.name)
	}
	if input == nil {
		input = strings.NewReader("")
	}
	line := QuoteArgs(argv)
	return c.exec(ctx, &command{line: line, shown: line, script: line, input: input})
}

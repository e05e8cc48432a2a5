package main

import (
	"io"

	"github.com/cutover/cutover/upgrade"
)

// termSafe is a writer that escapes what could steer the operator's terminal
// (upgrade.EscapeControls): control characters other than newline and tab, DEL, the C1
// controls and bytes that are not UTF-8. Node output and messages reach the terminal through
// it. JSON output passes unchanged: it holds no raw control characters, and \u00XX is also how
// JSON spells them.
type termSafe struct{ w io.Writer }

func (t termSafe) Write(p []byte) (int, error) {
	s := upgrade.EscapeControls(string(p))
	if len(s) == len(p) {
		return t.w.Write(p)
	}
	if _, err := t.w.Write([]byte(s)); err != nil {
		return 0, err
	}
	return len(p), nil
}

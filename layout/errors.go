package layout

import (
	"errors"
	"fmt"
)

// kind classifies the errors callers act on.
type kind int

const (
	kindNotSideBySide kind = iota + 1
	kindDisagree
	kindNotInstalled
)

// layoutError is an error of one kind; its message is complete on its own.
type layoutError struct {
	kind kind
	msg  string
}

func (e *layoutError) Error() string { return e.msg }

// Is makes errors.Is match any layoutError of the same kind, anywhere in a joined tree.
func (e *layoutError) Is(target error) bool {
	t, ok := target.(*layoutError)
	return ok && t.kind == e.kind
}

func newError(k kind, format string, args ...any) error {
	return &layoutError{kind: k, msg: fmt.Sprintf(format, args...)}
}

// IsNotSideBySide reports whether err says a node's installation is not side-by-side: a link
// is missing, is not a symlink, or points outside the application's version trees.
func IsNotSideBySide(err error) bool {
	return errors.Is(err, &layoutError{kind: kindNotSideBySide})
}

// IsDisagree reports whether err says the lib and share links point to different versions.
func IsDisagree(err error) bool {
	return errors.Is(err, &layoutError{kind: kindDisagree})
}

// IsNotInstalled reports whether err says a version lacks one or both of its trees.
func IsNotInstalled(err error) bool {
	return errors.Is(err, &layoutError{kind: kindNotInstalled})
}

package main

import (
	"fmt"
	"io"
	"unicode/utf8"
)

// termSafe is a writer that escapes what could steer the operator's terminal: control
// characters other than newline and tab (ESC above all), DEL and the C1 controls become
// \u00XX, bytes that are not UTF-8 become \xNN. Node output and messages reach the terminal
// through it. JSON output passes unchanged: it holds no raw control characters, and \u00XX
// is also how JSON spells them.
type termSafe struct{ w io.Writer }

func (t termSafe) Write(p []byte) (int, error) {
	clean := true
	for i := 0; i < len(p); {
		r, size := utf8.DecodeRune(p[i:])
		if unsafeRune(r, size) {
			clean = false
			break
		}
		i += size
	}
	if clean {
		return t.w.Write(p)
	}
	out := make([]byte, 0, len(p)+16)
	for i := 0; i < len(p); {
		r, size := utf8.DecodeRune(p[i:])
		switch {
		case r == utf8.RuneError && size <= 1:
			out = fmt.Appendf(out, `\x%02x`, p[i])
		case unsafeRune(r, size):
			out = fmt.Appendf(out, `\u%04x`, r)
		default:
			out = append(out, p[i:i+size]...)
		}
		i += size
	}
	if _, err := t.w.Write(out); err != nil {
		return 0, err
	}
	return len(p), nil
}

// unsafeRune reports whether the rune r, decoded from size bytes, must be escaped.
func unsafeRune(r rune, size int) bool {
	switch {
	case r == utf8.RuneError && size <= 1:
		return true
	case r == '\n' || r == '\t':
		return false
	case r < 0x20 || r == 0x7f:
		return true
	case r >= 0x80 && r <= 0x9f:
		return true
	}
	return false
}

package upgrade

import (
	"fmt"
	"unicode/utf8"
)

// EscapeControls returns s with what could steer a terminal escaped: control characters other
// than newline and tab (ESC above all), DEL and the C1 controls become \u00XX, bytes that are
// not UTF-8 become \xNN. What a node printed reaches the run log, and the terminal, through it
// (docs/design.md §9); \u00XX is also how JSON spells those characters.
func EscapeControls(s string) string {
	clean := true
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if unsafeRune(r, size) {
			clean = false
			break
		}
		i += size
	}
	if clean {
		return s
	}
	out := make([]byte, 0, len(s)+16)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size <= 1:
			out = fmt.Appendf(out, `\x%02x`, s[i])
		case unsafeRune(r, size):
			out = fmt.Appendf(out, `\u%04x`, r)
		default:
			out = append(out, s[i:i+size]...)
		}
		i += size
	}
	return string(out)
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

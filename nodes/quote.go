package nodes

import "strings"

// shellWords are the words a POSIX shell (or bash, which is /bin/sh on some
// systems) may treat as reserved when they stand in command position. Quote
// quotes them so that they are always plain words.
var shellWords = map[string]bool{
	"case": true, "coproc": true, "do": true, "done": true, "elif": true, "else": true,
	"esac": true, "fi": true, "for": true, "function": true, "if": true, "in": true,
	"select": true, "then": true, "time": true, "until": true, "while": true,
}

// Quote returns s quoted for a POSIX sh so that the shell reads it back as
// exactly one word equal to s, in any position of a command line. Words made
// only of letters, digits and the characters _@%+:,./- (and not a reserved
// word such as "if") are returned as they are. Anything else is put in single
// quotes, a single quote inside becoming the four characters that end the
// quoting, add an escaped quote and quote again; the empty string becomes a
// pair of single quotes. For example:
//
//	Quote("stop")        // stop
//	Quote("it's $(x)")   // 'it'\''s $(x)'
//	Quote("")            // ''
func Quote(s string) string {
	if s == "" {
		return "''"
	}
	if isPlainWord(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// QuoteArgs quotes each element of argv with Quote and joins them with
// spaces.
func QuoteArgs(argv []string) string {
	quoted := make([]string, len(argv))
	for i, a := range argv {
		quoted[i] = Quote(a)
	}
	return strings.Join(quoted, " ")
}

// isPlainWord reports whether s needs no quoting at all.
func isPlainWord(s string) bool {
	if shellWords[s] {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("_@%+:,./-", c) >= 0:
		default:
			return false
		}
	}
	return true
}

package cfgupgrade

import "fmt"

// MaxJSONDepth bounds how deeply the objects and arrays of a JSON document cutover reads may
// nest: the application's config, a migration file, and the other JSON files cutover reads
// from disk or from a node. Real configs nest a few levels; a document past the bound is
// refused before it is decoded, so a hostile one costs one pass over its bytes, not the
// decoder's time and stack.
const MaxJSONDepth = 128

// CheckJSONDepth refuses data whose objects and arrays nest deeper than limit, with an error
// naming the limit and where it was passed. It reads data once and decodes nothing: data
// that is not JSON passes, for the decoder to refuse.
func CheckJSONDepth(data []byte, limit int) error {
	depth, inString, escaped := 0, false, false
	for i, b := range data {
		if inString {
			switch {
			case escaped:
				escaped = false
			case b == '\\':
				escaped = true
			case b == '"':
				inString = false
			}
			continue
		}
		switch b {
		case '"':
			inString = true
		case '[', '{':
			if depth++; depth > limit {
				return fmt.Errorf("objects and arrays nest deeper than %d levels (at byte %d): refused", limit, i)
			}
		case ']', '}':
			depth--
		}
	}
	return nil
}

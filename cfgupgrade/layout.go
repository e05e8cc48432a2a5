package cfgupgrade

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
)

// layout is how a JSON document is written: Migrate writes the migrated config in the
// original's layout, so that the file changes by the migration only.
type layout struct {
	indent  string // one level of indentation; "" writes the document on one line
	newline string // "\n" or "\r\n"
	colon   string // between a member's name and its value: ":" or ": "
	comma   string // between the elements of a container on one line: "," or ", "
	final   bool   // the document ends with a newline
	// inline holds the pointers of the objects and arrays that a document of many lines
	// wrote on one line, such as "tags": ["a", "b"]: they are written on one line again.
	inline map[string]bool
}

// prettyLayout is the layout of diffs and of documents cutover writes from scratch: two
// spaces, one member a line, a final newline.
var prettyLayout = layout{indent: "  ", newline: "\n", colon: ": ", comma: ", ", final: true}

// layoutOf returns the layout of doc, a valid JSON document: its indentation (so many spaces
// or a tab per level, or none for a document on one line), its line ends, the spacing after
// its colons and commas, whether it ends with a newline, and which of its objects and arrays
// are on one line. What it cannot tell it takes from prettyLayout.
func layoutOf(doc []byte) layout {
	l := layout{newline: "\n", colon: ":", comma: ""}
	l.final = bytes.HasSuffix(doc, []byte("\n"))
	if bytes.HasSuffix(doc, []byte("\r\n")) {
		l.newline = "\r\n"
	}
	inString, escaped, depth := false, false, 0
	sawColon, sawComma, multiline := false, false, false
	for i := 0; i < len(doc); i++ {
		c := doc[i]
		if inString {
			switch {
			case escaped:
				escaped = false
			case c == '\\':
				escaped = true
			case c == '"':
				inString = false
			}
			continue
		}
		switch c {
		case '"':
			inString = true
		case '{', '[':
			depth++
		case '}', ']':
			depth--
		case ':':
			if !sawColon {
				sawColon = true
				if i+1 < len(doc) && (doc[i+1] == ' ' || doc[i+1] == '\t') {
					l.colon = ": "
				}
			}
		case ',':
			if !sawComma && i+1 < len(doc) && doc[i+1] != '\n' && doc[i+1] != '\r' {
				sawComma = true // the first comma between elements on one line
				l.comma = ","
				if doc[i+1] == ' ' {
					l.comma = ", "
				}
			}
		case '\n':
			if depth < 1 || multiline {
				continue
			}
			if i > 0 && doc[i-1] == '\r' {
				l.newline = "\r\n"
			}
			j := i + 1
			for j < len(doc) && (doc[j] == ' ' || doc[j] == '\t') {
				j++
			}
			if j == len(doc) || doc[j] == '\n' || doc[j] == '\r' || doc[j] == '}' || doc[j] == ']' {
				continue // an empty line or a closing bracket tells nothing of a level
			}
			multiline = true
			l.indent = unitOf(string(doc[i+1:j]), depth)
		}
	}
	if !sawColon && multiline {
		l.colon = prettyLayout.colon
	}
	if !sawComma {
		l.comma = "," // no comma on a line: as compact as the colons
		if l.colon == ": " {
			l.comma = ", "
		}
	}
	if multiline {
		l.inline = inlineContainers(doc)
	}
	return l
}

// inlineContainers returns the pointers of the objects and arrays of doc, a valid JSON
// document, that are written on one line, leaving out those inside another such one and
// empty ones: "{}" tells nothing of how its members would be written.
func inlineContainers(doc []byte) map[string]bool {
	dec := json.NewDecoder(bytes.NewReader(doc))
	out := map[string]bool{}
	// walk reads the value at segs; it reports whether the value is a container on one
	// line, which the caller records unless it is on one line itself.
	var walk func(segs []string) (bool, error)
	walk = func(segs []string) (bool, error) {
		tok, err := dec.Token()
		if err != nil {
			return false, err
		}
		d, ok := tok.(json.Delim)
		if !ok {
			return false, nil
		}
		start := dec.InputOffset() - 1
		var inside []string
		n := 0
		for ; dec.More(); n++ {
			i := n
			name := strconv.Itoa(i)
			if d == '{' {
				if tok, err = dec.Token(); err != nil {
					return false, err
				}
				name, _ = tok.(string)
			}
			child := append(segs[:len(segs):len(segs)], name)
			one, err := walk(child)
			if err != nil {
				return false, err
			}
			if one {
				inside = append(inside, formatPointer(child))
			}
		}
		if _, err := dec.Token(); err != nil {
			return false, err
		}
		if n > 0 && bytes.IndexByte(doc[start:dec.InputOffset()], '\n') < 0 {
			return true, nil
		}
		for _, p := range inside {
			out[p] = true
		}
		return false, nil
	}
	if _, err := walk(nil); err != nil {
		return nil
	}
	return out
}

// unitOf returns one level of the indentation ws of a line depth levels deep: ws when it
// repeats a unit depth times, two spaces otherwise.
func unitOf(ws string, depth int) string {
	if ws == "" || len(ws)%depth != 0 {
		return prettyLayout.indent
	}
	unit := ws[:len(ws)/depth]
	if strings.Repeat(unit, depth) != ws {
		return prettyLayout.indent
	}
	return unit
}

// encode writes v, a decoded JSON value, in layout l.
func (l layout) encode(v any) ([]byte, error) {
	var b bytes.Buffer
	if err := l.write(&b, v, 0, nil); err != nil {
		return nil, err
	}
	if l.final {
		b.WriteString(l.newline)
	}
	return b.Bytes(), nil
}

// write writes v, found at segs, depth levels deep. A container the original wrote on one
// line is written on one line, with all it holds.
func (l layout) write(b *bytes.Buffer, v any, depth int, segs []string) error {
	switch v.(type) {
	case *object, []any:
		if l.indent != "" && len(l.inline) > 0 && l.inline[formatPointer(segs)] {
			l.indent = ""
		}
	}
	switch x := v.(type) {
	case *object:
		if x.len() == 0 {
			b.WriteString("{}")
			return nil
		}
		b.WriteByte('{')
		var err error
		i := 0
		x.each(func(name string, v any) {
			if err != nil {
				return
			}
			l.separate(b, i, depth+1)
			i++
			if err = writeScalar(b, name); err == nil {
				b.WriteString(l.colon)
				err = l.write(b, v, depth+1, append(segs[:len(segs):len(segs)], name))
			}
		})
		if err != nil {
			return err
		}
		l.lineBreak(b, depth)
		b.WriteByte('}')
	case []any:
		if len(x) == 0 {
			b.WriteString("[]")
			return nil
		}
		b.WriteByte('[')
		for i, e := range x {
			l.separate(b, i, depth+1)
			if err := l.write(b, e, depth+1, append(segs[:len(segs):len(segs)], strconv.Itoa(i))); err != nil {
				return err
			}
		}
		l.lineBreak(b, depth)
		b.WriteByte(']')
	default:
		return writeScalar(b, v)
	}
	return nil
}

// separate starts the i-th element of a container depth levels deep.
func (l layout) separate(b *bytes.Buffer, i, depth int) {
	if i > 0 {
		if l.indent == "" {
			b.WriteString(l.comma)
		} else {
			b.WriteByte(',')
		}
	}
	l.lineBreak(b, depth)
}

// lineBreak starts a new line depth levels deep; nothing in a one-line layout.
func (l layout) lineBreak(b *bytes.Buffer, depth int) {
	if l.indent == "" {
		return
	}
	b.WriteString(l.newline)
	for range depth {
		b.WriteString(l.indent)
	}
}

// writeScalar writes a string, number, boolean or null as encoding/json does, without
// escaping HTML; a json.Number is written as it was read.
func writeScalar(b *bytes.Buffer, v any) error {
	var enc bytes.Buffer
	e := json.NewEncoder(&enc)
	e.SetEscapeHTML(false)
	if err := e.Encode(v); err != nil {
		return fmt.Errorf("encode %s: %w", describe(v), err)
	}
	b.Write(bytes.TrimSuffix(enc.Bytes(), []byte("\n")))
	return nil
}

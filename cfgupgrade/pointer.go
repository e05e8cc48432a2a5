package cfgupgrade

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// wildcard is the pointer segment that matches every member of an object or
// element of an array. RFC 6901 has no escape for it, so a member literally
// named "*" cannot be addressed.
const wildcard = "*"

// appendIndex is the array segment that names the position after the last
// element (RFC 6901); a set to it appends.
const appendIndex = "-"

// parsePointer splits a JSON Pointer (RFC 6901) into unescaped segments.
// The empty pointer, the whole document, has no segments.
func parsePointer(s string) ([]string, error) {
	if s == "" {
		return nil, nil
	}
	if s[0] != '/' {
		return nil, fmt.Errorf("pointer %q does not start with \"/\"", s)
	}
	segs := strings.Split(s[1:], "/")
	for i, seg := range segs {
		if !strings.Contains(seg, "~") {
			continue
		}
		var b strings.Builder
		for j := 0; j < len(seg); j++ {
			if seg[j] != '~' {
				b.WriteByte(seg[j])
				continue
			}
			if j+1 == len(seg) || (seg[j+1] != '0' && seg[j+1] != '1') {
				return nil, fmt.Errorf("pointer %q: \"~\" must be followed by 0 or 1", s)
			}
			if seg[j+1] == '0' {
				b.WriteByte('~')
			} else {
				b.WriteByte('/')
			}
			j++
		}
		segs[i] = b.String()
	}
	return segs, nil
}

var escaper = strings.NewReplacer("~", "~0", "/", "~1")

// formatPointer is the inverse of parsePointer.
func formatPointer(segs []string) string {
	var b strings.Builder
	for _, seg := range segs {
		b.WriteByte('/')
		b.WriteString(escaper.Replace(seg))
	}
	return b.String()
}

func countWildcards(segs []string) int {
	n := 0
	for _, seg := range segs {
		if seg == wildcard {
			n++
		}
	}
	return n
}

// arrayIndex parses seg as an index into an array of n elements. found is
// false for "-" and for indexes past the end.
func arrayIndex(segs []string, k, n int) (i int, found bool, err error) {
	seg := segs[k]
	if seg == appendIndex {
		return n, false, nil
	}
	bad := len(seg) == 0 || len(seg) > 9 || (len(seg) > 1 && seg[0] == '0')
	for _, c := range seg {
		bad = bad || c < '0' || c > '9'
	}
	if bad {
		return 0, false, fmt.Errorf("%s is an array and %q is not an index", where(segs[:k]), seg)
	}
	i, _ = strconv.Atoi(seg)
	return i, i < n, nil
}

// child returns the member segs[k] of node, which is at segs[:k]. found is
// false when the member is absent; it is an error when node is not an object
// or array.
func child(node any, segs []string, k int) (v any, found bool, err error) {
	switch n := node.(type) {
	case *object:
		v, found = n.get(segs[k])
		return v, found, nil
	case []any:
		i, found, err := arrayIndex(segs, k, len(n))
		if !found || err != nil {
			return nil, false, err
		}
		return n[i], true, nil
	}
	return nil, false, notContainer(node, segs[:k])
}

func notContainer(node any, at []string) error {
	return fmt.Errorf("%s is %s, not an object or array", where(at), describe(node))
}

// where names the value at segs in error messages.
func where(segs []string) string {
	if len(segs) == 0 {
		return "the document"
	}
	return formatPointer(segs)
}

// lookup returns the value at segs in root.
func lookup(root any, segs []string) (v any, found bool, err error) {
	v = root
	for k := range segs {
		v, found, err = child(v, segs, k)
		if !found || err != nil {
			return nil, false, err
		}
	}
	return v, true, nil
}

// setAt sets the value at segs (at least one segment) in root to val and
// returns the new root. The parent must exist. With ifAbsent an existing
// value is kept. An array index equal to the length, or "-", appends.
func setAt(root any, segs []string, val any, ifAbsent bool) (any, error) {
	return setIn(root, segs, 0, val, ifAbsent)
}

func setIn(node any, segs []string, k int, val any, ifAbsent bool) (any, error) {
	last := k == len(segs)-1
	switch n := node.(type) {
	case *object:
		key := segs[k]
		if last {
			if _, ok := n.get(key); !ok || !ifAbsent {
				n.set(key, val)
			}
			return n, nil
		}
		c, ok := n.get(key)
		if !ok {
			return nil, fmt.Errorf("parent %s does not exist", formatPointer(segs[:k+1]))
		}
		c, err := setIn(c, segs, k+1, val, ifAbsent)
		if err != nil {
			return nil, err
		}
		n.set(key, c)
		return n, nil
	case []any:
		i, found, err := arrayIndex(segs, k, len(n))
		if err != nil {
			return nil, err
		}
		if last {
			switch {
			case found && !ifAbsent:
				n[i] = val
			case !found && i == len(n):
				n = append(n, val)
			case !found:
				return nil, fmt.Errorf("%s: index %d is past the end of the array (length %d)", formatPointer(segs), i, len(n))
			}
			return n, nil
		}
		if !found {
			return nil, fmt.Errorf("parent %s does not exist", formatPointer(segs[:k+1]))
		}
		c, err := setIn(n[i], segs, k+1, val, ifAbsent)
		if err != nil {
			return nil, err
		}
		n[i] = c
		return n, nil
	}
	return nil, notContainer(node, segs[:k])
}

// removeAt removes the value at segs (at least one segment) from root and
// returns the new root. A value that is not there is not an error.
func removeAt(root any, segs []string) (any, error) {
	return removeIn(root, segs, 0)
}

func removeIn(node any, segs []string, k int) (any, error) {
	last := k == len(segs)-1
	switch n := node.(type) {
	case *object:
		c, ok := n.get(segs[k])
		switch {
		case !ok:
		case last:
			n.remove(segs[k])
		default:
			c, err := removeIn(c, segs, k+1)
			if err != nil {
				return nil, err
			}
			n.set(segs[k], c)
		}
		return n, nil
	case []any:
		i, found, err := arrayIndex(segs, k, len(n))
		switch {
		case err != nil:
			return nil, err
		case !found:
		case last:
			n = append(n[:i:i], n[i+1:]...)
		default:
			c, err := removeIn(n[i], segs, k+1)
			if err != nil {
				return nil, err
			}
			n[i] = c
		}
		return n, nil
	}
	return nil, notContainer(node, segs[:k])
}

// match is one concrete path that a pointer with wildcards matched.
type match struct {
	segs  []string // the concrete path
	binds []string // the member each wildcard matched, in order
}

// expand returns the concrete paths in root that pattern matches, objects'
// members in sorted order and arrays' elements in index order. A member that
// is absent ends its branch without a match, or is an error when strict (the
// pattern names the parents of a set).
// Passing through a value that is not an object or array is an error.
func expand(root any, pattern []string, strict bool) ([]match, error) {
	var out []match
	var walk func(node any, k int, segs, binds []string) error
	walk = func(node any, k int, segs, binds []string) error {
		if k == len(pattern) {
			out = append(out, match{segs: segs, binds: binds})
			return nil
		}
		if pattern[k] != wildcard {
			path := append(segs[:k:k], pattern[k])
			c, found, err := child(node, path, k)
			switch {
			case err != nil:
				return err
			case !found && strict:
				return fmt.Errorf("parent %s does not exist", formatPointer(path))
			case !found:
				return nil
			}
			return walk(c, k+1, path, binds)
		}
		switch n := node.(type) {
		case *object:
			keys := n.names()
			sort.Strings(keys)
			for _, key := range keys {
				c, _ := n.get(key)
				if err := walk(c, k+1, append(segs[:k:k], key), append(binds[:len(binds):len(binds)], key)); err != nil {
					return err
				}
			}
			return nil
		case []any:
			for i, c := range n {
				key := strconv.Itoa(i)
				if err := walk(c, k+1, append(segs[:k:k], key), append(binds[:len(binds):len(binds)], key)); err != nil {
					return err
				}
			}
			return nil
		}
		return notContainer(node, segs[:k])
	}
	if err := walk(root, 0, nil, nil); err != nil {
		return nil, err
	}
	return out, nil
}

// bind replaces the wildcards of pattern, in order, with binds.
func bind(pattern, binds []string) []string {
	out := make([]string, len(pattern))
	j := 0
	for i, seg := range pattern {
		if seg == wildcard && j < len(binds) {
			seg = binds[j]
			j++
		}
		out[i] = seg
	}
	return out
}

// isPrefix reports whether a is a proper prefix of b.
func isPrefix(a, b []string) bool {
	if len(a) >= len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// deepCopy returns a copy of a decoded JSON value that shares nothing with v.
func deepCopy(v any) any {
	switch x := v.(type) {
	case *object:
		o := newObject()
		x.each(func(name string, c any) { o.set(name, deepCopy(c)) })
		return o
	case []any:
		s := make([]any, len(x))
		for i, c := range x {
			s[i] = deepCopy(c)
		}
		return s
	}
	return v
}

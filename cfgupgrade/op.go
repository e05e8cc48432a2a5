package cfgupgrade

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
)

// Op is one operation of a migration, spelled like JSON Patch (RFC 6902).
// Paths are JSON Pointers (RFC 6901) whose segments may be "*", which
// matches every member of an object or element of an array.
//
//   - set: sets Path to Value. The parent must exist; an array index equal to
//     the length, or "-", appends. With IfAbsent an existing value is kept.
//     A "*" may stand anywhere but in the last segment: the value is set in
//     every matched parent.
//   - remove: removes Path. A value that is not there is not an error, so a
//     redone migration is harmless. A "*" may stand anywhere.
//   - move: moves From to Path, replacing what Path held. The "*"s of From
//     and Path bind in order to the same members, so
//     {"op": "move", "from": "/nodes/*/ip", "path": "/nodes/*/address"}
//     renames the field in every node. A From that is not there moves nothing.
//   - copy: like move, but leaves From in place; with IfAbsent an existing
//     value at Path is kept.
//
// A member literally named "*" cannot be addressed: RFC 6901 has no escape
// for it. The ops of one migration may add at most eight times the config's
// size plus a million values; a migration that would grow it more is refused.
type Op struct {
	Op       string          `json:"op"`
	Path     string          `json:"path"`
	From     string          `json:"from,omitempty"`
	Value    json.RawMessage `json:"value,omitempty"`
	IfAbsent bool            `json:"if_absent,omitempty"`
}

// The op names.
const (
	opSet    = "set"
	opRemove = "remove"
	opMove   = "move"
	opCopy   = "copy"
)

// check reports whether op is well-formed, without looking at any document.
func (op Op) check() error {
	switch op.Op {
	case opSet, opRemove, opMove, opCopy:
	case "":
		return errors.New("op is missing")
	default:
		return fmt.Errorf("op %q is unknown (want set, remove, move or copy)", op.Op)
	}
	path, err := opPointer("path", op.Path)
	if err != nil {
		return err
	}
	hasFrom, hasValue := op.From != "", len(op.Value) > 0
	switch op.Op {
	case opSet:
		if !hasValue {
			return errors.New("set needs a value")
		}
		if !json.Valid(op.Value) {
			return errors.New("value is not valid JSON")
		}
		if hasFrom {
			return errors.New("set takes no from")
		}
		if path[len(path)-1] == wildcard {
			return fmt.Errorf("path %q: set cannot have a \"*\" in the last segment", op.Path)
		}
	case opRemove:
		if hasValue || hasFrom || op.IfAbsent {
			return errors.New("remove takes only a path")
		}
	case opMove, opCopy:
		if hasValue {
			return fmt.Errorf("%s takes no value", op.Op)
		}
		if op.Op == opMove && op.IfAbsent {
			return errors.New("move takes no if_absent")
		}
		from, err := opPointer("from", op.From)
		if err != nil {
			return err
		}
		if nf, np := countWildcards(from), countWildcards(path); nf != np {
			return fmt.Errorf("from %q has %d \"*\" and path %q has %d: they must match", op.From, nf, op.Path, np)
		}
		if op.Op == opMove && isPrefix(from, path) {
			return fmt.Errorf("cannot move %q into itself (%q)", op.From, op.Path)
		}
	}
	return nil
}

// opPointer parses an op's pointer, which must name a member, not the whole
// document.
func opPointer(field, p string) ([]string, error) {
	if p == "" {
		return nil, fmt.Errorf("%s is missing or empty (an op cannot address the whole document)", field)
	}
	segs, err := parsePointer(p)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", field, err)
	}
	return segs, nil
}

// budget bounds how many values the ops of one migration may add to a
// document: a copy can double it, so a few dozen ops could otherwise exhaust
// the master's memory.
type budget struct{ left int }

// newBudget allows a document to grow by eight times its size plus a
// million values.
func newBudget(root any) *budget {
	return &budget{left: 8*countValues(root) + 1<<20}
}

// spend charges the values of v to the budget.
func (b *budget) spend(v any) error {
	b.left -= countValues(v)
	if b.left < 0 {
		return errors.New("the migration makes the config too large (more than eight times its size)")
	}
	return nil
}

// countValues returns the number of JSON values in v, itself included.
func countValues(v any) int {
	n := 1
	switch x := v.(type) {
	case *object:
		x.each(func(_ string, c any) { n += countValues(c) })
	case []any:
		for _, c := range x {
			n += countValues(c)
		}
	}
	return n
}

// apply applies op, which must be well-formed, to root and returns the new
// root. root may be changed in place even when apply fails. The values that
// set and copy add are charged to b.
func (op Op) apply(root any, b *budget) (any, error) {
	path, _ := parsePointer(op.Path)
	switch op.Op {
	case opSet:
		parents, err := expand(root, path[:len(path)-1], true)
		if err != nil {
			return nil, err
		}
		for _, m := range parents {
			val, err := decodeValue(op.Value)
			if err == nil {
				err = b.spend(val)
			}
			if err != nil {
				return nil, err
			}
			target := append(m.segs[:len(m.segs):len(m.segs)], path[len(path)-1])
			if root, err = setAt(root, target, val, op.IfAbsent); err != nil {
				return nil, err
			}
		}
		return root, nil
	case opRemove:
		targets, err := expand(root, path, false)
		if err != nil {
			return nil, err
		}
		// Backwards, so that removing an array element does not shift the
		// elements still to be removed.
		for i := len(targets) - 1; i >= 0; i-- {
			if root, err = removeAt(root, targets[i].segs); err != nil {
				return nil, err
			}
		}
		return root, nil
	}
	return op.transfer(root, path, b)
}

// transfer applies a move or copy: it takes every matched value first,
// removes the sources of a move (backwards, as remove does), then sets the
// targets in order.
func (op Op) transfer(root any, path []string, b *budget) (any, error) {
	from, _ := parsePointer(op.From)
	sources, err := expand(root, from, false)
	if err != nil {
		return nil, err
	}
	type pair struct {
		from, to []string
		val      any
		// in is the object of a move within one object: the member is renamed where
		// it stands, held between the removal and the set.
		in   *object
		held *member
	}
	var pairs []pair
	for _, m := range sources {
		to := bind(path, m.binds)
		if slices.Equal(m.segs, to) {
			continue
		}
		if op.Op == opMove && isPrefix(m.segs, to) {
			return nil, fmt.Errorf("cannot move %s into itself (%s)", formatPointer(m.segs), formatPointer(to))
		}
		val, _, err := lookup(root, m.segs)
		if err != nil {
			return nil, err
		}
		if op.Op == opCopy {
			if err := b.spend(val); err != nil {
				return nil, err
			}
			val = deepCopy(val)
		}
		p := pair{from: m.segs, to: to, val: val}
		if op.Op == opMove && len(to) == len(m.segs) && slices.Equal(to[:len(to)-1], m.segs[:len(to)-1]) {
			parent, _, _ := lookup(root, m.segs[:len(to)-1])
			p.in, _ = parent.(*object)
		}
		pairs = append(pairs, p)
	}
	if op.Op == opMove {
		for i := len(pairs) - 1; i >= 0; i-- {
			p := &pairs[i]
			if p.in != nil {
				p.held = p.in.hold(p.from[len(p.from)-1])
				continue
			}
			if root, err = removeAt(root, p.from); err != nil {
				return nil, err
			}
		}
	}
	for _, p := range pairs {
		if p.held != nil {
			p.in.putBack(p.held, p.to[len(p.to)-1], p.val)
			continue
		}
		if root, err = setAt(root, p.to, p.val, op.IfAbsent); err != nil {
			return nil, err
		}
	}
	return root, nil
}

// applyOps applies ops in order to root, naming the failing op by its index
// in the list called name ("up" or "down"), within budget b.
func applyOps(root any, ops []Op, name string, b *budget) (any, error) {
	for i, op := range ops {
		if err := op.check(); err != nil {
			return nil, fmt.Errorf("%s[%d]: %w", name, i, err)
		}
		var err error
		if root, err = op.apply(root, b); err != nil {
			return nil, fmt.Errorf("%s[%d]: %s: %w", name, i, op, err)
		}
	}
	return root, nil
}

// String describes op in a line: "set /a", "move /a to /b".
func (op Op) String() string {
	if op.Op == opMove || op.Op == opCopy {
		return fmt.Sprintf("%s %s to %s", op.Op, op.From, op.Path)
	}
	return op.Op + " " + op.Path
}

// decodeJSON decodes exactly one JSON value from data, keeping numbers exact and objects'
// members in order (see object); a value that nests deeper than MaxJSONDepth is refused
// before it is decoded.
func decodeJSON(data []byte) (any, error) {
	if err := CheckJSONDepth(data, MaxJSONDepth); err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	var raw json.RawMessage
	if err := dec.Decode(&raw); err != nil {
		if err == io.EOF {
			return nil, errors.New("no JSON value")
		}
		return nil, err
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, errors.New("data after the JSON value")
	}
	return decodeOrdered(raw)
}

func decodeValue(raw json.RawMessage) (any, error) {
	v, err := decodeJSON(raw)
	if err != nil {
		return nil, fmt.Errorf("value: %w", err)
	}
	return v, nil
}

// encodeJSON returns v as JSON indented by two spaces, objects' members in their order, with
// a final newline: the form of diffs.
func encodeJSON(v any) ([]byte, error) {
	return prettyLayout.encode(v)
}

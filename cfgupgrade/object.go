package cfgupgrade

import (
	"bytes"
	"encoding/json"
	"fmt"
)

// object is a decoded JSON object that keeps its members in the order of the document, so
// that a migrated config is written back with every key where the operator had it: a key
// that is set again stays in place, a new key goes at the end, and a key that a move renames
// within its object keeps its place under the new name.
type object struct {
	members []*member          // in document order, removed ones included until compacted
	index   map[string]*member // the members present, by name
	removed int                // how many of members are removed
}

// member is one name and value of an object.
type member struct {
	name    string
	val     any
	removed bool
	held    bool // removed by a move that puts it back under another name (see hold)
}

func newObject() *object { return &object{index: map[string]*member{}} }

// len returns the number of members.
func (o *object) len() int { return len(o.index) }

// get returns the value of the member name.
func (o *object) get(name string) (any, bool) {
	m, ok := o.index[name]
	if !ok {
		return nil, false
	}
	return m.val, true
}

// set gives the member name the value v, where it stands, or adds it at the end.
func (o *object) set(name string, v any) {
	if m, ok := o.index[name]; ok {
		m.val = v
		return
	}
	m := &member{name: name, val: v}
	o.members = append(o.members, m)
	o.index[name] = m
}

// remove removes the member name, if there is one.
func (o *object) remove(name string) {
	if m, ok := o.index[name]; ok {
		o.drop(m)
	}
}

// hold removes the member name but keeps its place for putBack; nil when there is none.
func (o *object) hold(name string) *member {
	m, ok := o.index[name]
	if !ok {
		return nil
	}
	m.held = true
	o.drop(m)
	return m
}

// putBack puts the held member m back in its place as name, with the value v, replacing
// any other member of that name.
func (o *object) putBack(m *member, name string, v any) {
	if other, ok := o.index[name]; ok {
		o.drop(other)
	}
	m.name, m.val, m.removed, m.held = name, v, false, false
	o.index[name] = m
	o.removed--
}

// drop removes m; once removed members are the majority, they are compacted away (held
// ones stay, for putBack), so that removing every member costs linear time.
func (o *object) drop(m *member) {
	delete(o.index, m.name)
	m.removed = true
	o.removed++
	if o.removed <= len(o.members)/2 {
		return
	}
	kept := o.members[:0]
	for _, m := range o.members {
		if !m.removed || m.held {
			kept = append(kept, m)
		}
	}
	clear(o.members[len(kept):])
	o.members = kept
	o.removed = 0
	for _, m := range kept {
		if m.removed {
			o.removed++
		}
	}
}

// each calls f with every member in order.
func (o *object) each(f func(name string, v any)) {
	for _, m := range o.members {
		if !m.removed {
			f(m.name, m.val)
		}
	}
}

// names returns the members' names in order.
func (o *object) names() []string {
	out := make([]string, 0, o.len())
	o.each(func(name string, _ any) { out = append(out, name) })
	return out
}

// decodeOrdered decodes data, one valid JSON value, keeping the order of every object's
// members and numbers exact. A name given twice keeps its first place and its last value,
// as encoding/json keeps the last value.
func decodeOrdered(data []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	return decodeValueAt(dec)
}

func decodeValueAt(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	d, ok := tok.(json.Delim)
	if !ok {
		return tok, nil // a string, json.Number, bool or nil
	}
	switch d {
	case '{':
		o := newObject()
		for dec.More() {
			tok, err := dec.Token()
			if err != nil {
				return nil, err
			}
			name, ok := tok.(string)
			if !ok {
				return nil, fmt.Errorf("object member name %v is not a string", tok)
			}
			v, err := decodeValueAt(dec)
			if err != nil {
				return nil, err
			}
			o.set(name, v)
		}
		_, err := dec.Token() // '}'
		return o, err
	case '[':
		a := []any{}
		for dec.More() {
			v, err := decodeValueAt(dec)
			if err != nil {
				return nil, err
			}
			a = append(a, v)
		}
		_, err := dec.Token() // ']'
		return a, err
	}
	return nil, fmt.Errorf("unexpected %v", d)
}

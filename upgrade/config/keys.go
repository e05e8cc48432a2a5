package config

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"

	"github.com/BurntSushi/toml"
)

// tables lists the keys of every table of cutover.toml by the table's dotted name ("" is the
// top level), and arrayTables the tables written [[name]], such as [[cluster.node]]. Both
// are read from Config's toml tags, so that they never lag behind the struct.
var tables, arrayTables = func() (map[string][]string, map[string]bool) {
	t, arrays := map[string][]string{}, map[string]bool{}
	var walk func(name string, typ reflect.Type)
	walk = func(name string, typ reflect.Type) {
		t[name] = []string{}
		for i := 0; i < typ.NumField(); i++ {
			key, _, _ := strings.Cut(typ.Field(i).Tag.Get("toml"), ",")
			if key == "" || key == "-" {
				continue
			}
			t[name] = append(t[name], key)
			ft, sub := typ.Field(i).Type, strings.TrimPrefix(name+"."+key, ".")
			if ft.Kind() == reflect.Slice && ft.Elem().Kind() == reflect.Struct {
				ft, arrays[sub] = ft.Elem(), true
			}
			if ft.Kind() == reflect.Struct && ft != reflect.TypeOf(Duration{}) {
				walk(sub, ft)
			}
		}
	}
	walk("", reflect.TypeOf(Config{}))
	return t, arrays
}()

// unknownKeys describes the keys of data that Config does not have, each with its line, its
// table and, when a known key is close, the key meant. A key below an unknown table is left
// out: the table is named instead.
func unknownKeys(data []byte, md toml.MetaData) []error {
	unknown := map[string]bool{}
	for _, k := range md.Undecoded() {
		unknown[k.String()] = true
	}
	var named []toml.Key
	seen := map[string]bool{}
	for _, k := range md.Undecoded() {
		if !seen[k.String()] && !belowUnknown(k, unknown) {
			seen[k.String()] = true
			named = append(named, k)
		}
	}
	var errs []error
	for i, k := range named {
		if i == maxKeyErrors {
			errs = append(errs, fmt.Errorf("and %d more unknown keys", len(named)-i))
			break
		}
		errs = append(errs, unknownKey(data, md, k))
	}
	return errs
}

// belowUnknown reports whether a table that holds k is itself one of the unknown keys.
func belowUnknown(k toml.Key, unknown map[string]bool) bool {
	for n := 1; n < len(k); n++ {
		if unknown[k[:n].String()] {
			return true
		}
	}
	return false
}

// unknownKey describes the unknown key k: its line, its table and a suggestion. A dotted key
// below a table that does not exist (ssh.usr in [[cluster.node]]) is described by its first
// unknown part.
func unknownKey(data []byte, md toml.MetaData, k toml.Key) error {
	n := len(k) - 1
	for n > 0 && tables[strings.Join(k[:n], ".")] == nil {
		n--
	}
	table, name := strings.Join(k[:n], "."), k[n]
	where := "at the top level"
	if table != "" {
		where = "in table " + tableHeader(table)
	}
	what, full := "key", k.String()
	if t := md.Type(k...); t == "Hash" || t == "ArrayHash" {
		what = "table"
	}
	if n < len(k)-1 {
		what, full = "table", strings.Join(k[:n+1], ".")
	}
	msg := fmt.Sprintf("unknown %s %q %s", what, full, where)
	if line := keyLine(data, k); line > 0 {
		msg = fmt.Sprintf("line %d: %s", line, msg)
	}
	if near := closest(name, tables[table]); len(near) > 0 {
		return fmt.Errorf("%s; did you mean %s?", msg, quoteOr(near))
	}
	if homes := tablesWith(name); len(homes) > 0 {
		return fmt.Errorf("%s; %s belongs %s", msg, name, strings.Join(homes, " or "))
	}
	return errors.New(msg)
}

// tableHeader writes a table's name as its header: [cluster], [[cluster.node]].
func tableHeader(table string) string {
	if arrayTables[table] {
		return "[[" + table + "]]"
	}
	return "[" + table + "]"
}

// tablesWith lists where the tables that have a key called name are: "in [ssh]", "at the
// top level".
func tablesWith(name string) []string {
	var out []string
	for table, keys := range tables {
		if !slices.Contains(keys, name) {
			continue
		}
		if table == "" {
			out = append(out, "at the top level")
		} else {
			out = append(out, "in "+tableHeader(table))
		}
	}
	sort.Strings(out)
	return out
}

func quoteOr(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	if len(q) == 1 {
		return q[0]
	}
	return strings.Join(q[:len(q)-1], ", ") + " or " + q[len(q)-1]
}

// closest returns the known keys that name most likely means: the same words written
// otherwise (batchSize, batch-size, size_batch for batch_size), else the nearest keys within a
// small edit distance, else the keys that name begins or that begin name (daemons for
// daemons_start and daemons_stop). It returns nothing when no key is close.
func closest(name string, known []string) []string {
	var same, prefix []string
	for _, k := range known {
		switch {
		case words(name) == words(k) || sortedWords(name) == sortedWords(k):
			same = append(same, k)
		case len(name) >= 3 && (strings.HasPrefix(k, name) || strings.HasPrefix(name, k+"_")):
			prefix = append(prefix, k)
		}
	}
	if len(same) > 0 {
		return same
	}
	best, near := 0, []string(nil)
	for _, k := range known {
		d := editDistance(strings.ToLower(name), k)
		if d > max(1, min(len(name), len(k))/3) {
			continue
		}
		switch {
		case near == nil || d < best:
			best, near = d, []string{k}
		case d == best:
			near = append(near, k)
		}
	}
	if len(near) > 0 {
		return near
	}
	return prefix
}

// words returns name in lower case without the separators _ - and space, so that
// daemonsStop, daemons-stop and DAEMONS_STOP all read daemonsstop.
func words(name string) string {
	return strings.Map(func(r rune) rune {
		if r == '_' || r == '-' || r == ' ' {
			return -1
		}
		return r
	}, strings.ToLower(name))
}

// sortedWords returns the lower-case words of name, separated by _ or -, in sorted order,
// so that stop_daemons reads as daemons_stop.
func sortedWords(name string) string {
	parts := strings.FieldsFunc(strings.ToLower(name), func(r rune) bool { return r == '_' || r == '-' })
	if len(parts) < 2 {
		return "\x00" + name // a single word is not a reordering of anything
	}
	sort.Strings(parts)
	return strings.Join(parts, "_")
}

// editDistance is the Levenshtein distance between a and b, in bytes, with a swap of two
// neighbours counting as one edit.
func editDistance(a, b string) int {
	if len(a) > 64 || len(b) > 64 {
		return max(len(a), len(b)) // too long to be a typo worth the work
	}
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}

// keyLine finds the line of a key the decoder did not know, for the error message; 0 when it
// cannot tell.
func keyLine(data []byte, key toml.Key) int {
	want := key.String()
	cur := ""
	for n, text := range strings.Split(string(data), "\n") {
		n++
		line := strings.TrimSpace(text)
		if strings.HasPrefix(line, "[") {
			cur = dotted(strings.Trim(line, "[] "))
			if cur == want {
				return n
			}
			continue
		}
		name, _, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		full := dotted(name)
		if cur != "" {
			full = cur + "." + full
		}
		if full == want || strings.HasPrefix(full, want+".") {
			return n
		}
	}
	return 0
}

// dotted writes a TOML key as the decoder's Key.String does: its parts without quotes or
// spaces, joined by dots.
func dotted(name string) string {
	parts := strings.Split(name, ".")
	for i, p := range parts {
		parts[i] = strings.Trim(strings.TrimSpace(p), `"'`)
	}
	return strings.Join(parts, ".")
}

package cfgupgrade

import (
	"fmt"
	"sort"
	"strings"
)

// diffContext is the number of unchanged lines shown around each change.
const diffContext = 3

// edit is one line of an edit script: ' ' kept, '-' deleted, '+' inserted.
type edit struct {
	kind byte
	text string
}

// unifiedDiff returns a unified diff from text a to text b, with the headers
// "--- aName" and "+++ bName", or "" when they are equal.
//
// It is a patience diff (see matchLines), which suits pretty-printed JSON,
// where names and addresses make most lines around a change unique, and
// stays fast on large configs.
func unifiedDiff(aName, bName string, a, b []byte) string {
	if string(a) == string(b) {
		return ""
	}
	x, y := splitLines(string(a)), splitLines(string(b))
	script := editScript(x, y)
	var out strings.Builder
	fmt.Fprintf(&out, "--- %s\n+++ %s\n", aName, bName)
	// ax, by are the line numbers (from 0) in x and y at script[i].
	ax, by := 0, 0
	for i := 0; i < len(script); {
		if script[i].kind == ' ' {
			i++
			ax++
			by++
			continue
		}
		// A hunk: from diffContext lines before this change to diffContext
		// lines after the last change that is at most 2*diffContext kept
		// lines further on.
		start := max(0, i-diffContext)
		end := i
		for j, kept := i, 0; j < len(script) && kept <= 2*diffContext; j++ {
			if script[j].kind == ' ' {
				kept++
				continue
			}
			kept = 0
			end = j + 1
		}
		end = min(len(script), end+diffContext)
		x0, y0 := ax-(i-start), by-(i-start)
		var nx, ny int
		var body strings.Builder
		for _, e := range script[start:end] {
			body.WriteByte(e.kind)
			body.WriteString(e.text)
			body.WriteByte('\n')
			if e.kind != '+' {
				nx++
			}
			if e.kind != '-' {
				ny++
			}
		}
		fmt.Fprintf(&out, "@@ -%s +%s @@\n%s", hunkRange(x0, nx), hunkRange(y0, ny), body.String())
		for _, e := range script[i:end] {
			if e.kind != '+' {
				ax++
			}
			if e.kind != '-' {
				by++
			}
		}
		i = end
	}
	return out.String()
}

// hunkRange formats a hunk's line range: first line (from 1) and count; an
// empty range names the line before it.
func hunkRange(start, n int) string {
	if n == 0 {
		return fmt.Sprintf("%d,0", start)
	}
	if n == 1 {
		return fmt.Sprintf("%d", start+1)
	}
	return fmt.Sprintf("%d,%d", start+1, n)
}

func splitLines(s string) []string {
	s = strings.TrimSuffix(s, "\n")
	if s == "" {
		return nil
	}
	return strings.Split(s, "\n")
}

// editScript returns the edits that turn x into y.
func editScript(x, y []string) []edit {
	var script []edit
	i, j := 0, 0
	for _, m := range matchLines(x, y) {
		for ; i < m[0]; i++ {
			script = append(script, edit{'-', x[i]})
		}
		for ; j < m[1]; j++ {
			script = append(script, edit{'+', y[j]})
		}
		script = append(script, edit{' ', x[i]})
		i, j = i+1, j+1
	}
	for ; i < len(x); i++ {
		script = append(script, edit{'-', x[i]})
	}
	for ; j < len(y); j++ {
		script = append(script, edit{'+', y[j]})
	}
	return script
}

// maxDiffDepth bounds the recursion of matchLines; deeper gaps are shown as
// changed wholesale.
const maxDiffDepth = 1000

// matchLines returns pairs of equal lines (x index, y index), increasing in
// both, by patience diff: the common prefix and suffix match; between them,
// the lines unique to both sides anchor the match, and the gaps between
// anchors are matched the same way.
func matchLines(x, y []string) [][2]int {
	var pairs [][2]int
	var match func(x0, x1, y0, y1, depth int)
	match = func(x0, x1, y0, y1, depth int) {
		for x0 < x1 && y0 < y1 && x[x0] == y[y0] {
			pairs = append(pairs, [2]int{x0, y0})
			x0, y0 = x0+1, y0+1
		}
		suffix := 0
		for x1-suffix > x0 && y1-suffix > y0 && x[x1-suffix-1] == y[y1-suffix-1] {
			suffix++
		}
		x1, y1 = x1-suffix, y1-suffix
		if x0 < x1 && y0 < y1 && depth < maxDiffDepth {
			px, py := x0, y0
			for _, a := range uniqueAnchors(x[x0:x1], y[y0:y1]) {
				ax, ay := a[0]+x0, a[1]+y0
				match(px, ax, py, ay, depth+1)
				pairs = append(pairs, [2]int{ax, ay})
				px, py = ax+1, ay+1
			}
			if px > x0 {
				match(px, x1, py, y1, depth+1)
			}
		}
		for k := 0; k < suffix; k++ {
			pairs = append(pairs, [2]int{x1 + k, y1 + k})
		}
	}
	match(0, len(x), 0, len(y), 0)
	return pairs
}

// uniqueAnchors returns the longest chain of pairs of lines that occur once
// in x and once in y, increasing in both.
func uniqueAnchors(x, y []string) [][2]int {
	type count struct{ nx, ny, ix, iy int }
	counts := make(map[string]*count)
	for i, s := range x {
		c := counts[s]
		if c == nil {
			c = &count{}
			counts[s] = c
		}
		c.nx++
		c.ix = i
	}
	for i, s := range y {
		if c := counts[s]; c != nil {
			c.ny++
			c.iy = i
		}
	}
	var cands [][2]int
	for _, c := range counts {
		if c.nx == 1 && c.ny == 1 {
			cands = append(cands, [2]int{c.ix, c.iy})
		}
	}
	sort.Slice(cands, func(i, j int) bool { return cands[i][0] < cands[j][0] })
	// Longest increasing subsequence of the y indexes (patience sorting).
	var tails []int // tails[k]: index in cands ending the best chain of length k+1
	prev := make([]int, len(cands))
	for i, c := range cands {
		k := sort.Search(len(tails), func(k int) bool { return cands[tails[k]][1] >= c[1] })
		prev[i] = -1
		if k > 0 {
			prev[i] = tails[k-1]
		}
		if k == len(tails) {
			tails = append(tails, i)
		} else {
			tails[k] = i
		}
	}
	if len(tails) == 0 {
		return nil
	}
	chain := make([][2]int, len(tails))
	for k, i := len(tails)-1, tails[len(tails)-1]; k >= 0; k-- {
		chain[k] = cands[i]
		i = prev[i]
	}
	return chain
}

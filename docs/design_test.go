// Package docs holds cutover's documents; its test keeps the code's citations of the design
// notes (design.md) resolving.
package docs

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// repoRoot is the repository's root, seen from this directory.
const repoRoot = ".."

// designSection is one numbered section of design.md: its title and the titles of the
// headings beneath it, in lower case.
type designSection struct {
	title string
	parts []string
}

// sectionHeading matches a numbered heading of design.md, "## 4. The stage machine" or
// "## 6b. Upgrade path policy", with the section's name in group 1 and its title in group 2.
var sectionHeading = regexp.MustCompile(`^##\s+([0-9]+[a-z]?)\.\s+(.*)$`)

// designSections reads the numbered sections of a design document, leaving out what lies in
// fenced code blocks.
func designSections(text string) map[string]*designSection {
	out := map[string]*designSection{}
	var cur *designSection
	fenced := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced || !strings.HasPrefix(line, "#") {
			continue
		}
		if m := sectionHeading.FindStringSubmatch(line); m != nil {
			cur = &designSection{title: strings.ToLower(strings.TrimSpace(m[2]))}
			out[m[1]] = cur
			continue
		}
		level := len(line) - len(strings.TrimLeft(line, "#"))
		switch {
		case level <= 2:
			cur = nil // an unnumbered section: nothing cites it by number
		case cur != nil:
			cur.parts = append(cur.parts, strings.ToLower(strings.TrimSpace(strings.TrimLeft(line, "#"))))
		}
	}
	return out
}

// has reports whether the section is, or has a heading, whose title begins with name: a
// citation `§4 "Crash model"` names the heading "Crash model" of §4, and `§9 "Hardening"`
// the section itself.
func (s *designSection) has(name string) bool {
	name = strings.ToLower(strings.TrimSpace(name))
	if strings.HasPrefix(s.title, name) {
		return true
	}
	for _, p := range s.parts {
		if strings.HasPrefix(p, name) {
			return true
		}
	}
	return false
}

// A citation is the design document's name, then one section or more, each perhaps with
// the quoted name of a part of it: `docs/design.md §4 "Backups", §9 "Hardening"`. Comment
// markers and line breaks may lie between the pieces, as when a comment wraps in the middle
// of one. The old form, DESIGN and a section, named a file outside the repository.
const (
	citeGap  = `(?:\s|//)*`
	citeSect = `§[0-9]+[a-z]?(?:,?` + citeGap + `"[^"\n]*")?`
)

var (
	citation = regexp.MustCompile(`(\bdocs/design\.md|\bdesign\.md|\bDESIGN(?:\.md)?\b)(` + citeGap + citeSect +
		`(?:` + citeGap + `(?:,` + citeGap + `)?(?:(?:and|or)` + citeGap + `)?` + citeSect + `)*)`)
	citedSection = regexp.MustCompile(`§([0-9]+[a-z]?)(?:,?` + citeGap + `"([^"\n]*)")?`)
)

// cite is one section a citation names.
type cite struct {
	line          int
	doc           string // how the citation names the document
	section, part string
}

// citations returns the citations of the design notes in a Go source text.
func citations(text string) []cite {
	var out []cite
	for _, m := range citation.FindAllStringSubmatchIndex(text, -1) {
		doc := text[m[2]:m[3]]
		refs := text[m[4]:m[5]]
		for _, r := range citedSection.FindAllStringSubmatchIndex(refs, -1) {
			c := cite{line: 1 + strings.Count(text[:m[4]+r[0]], "\n"), doc: doc, section: refs[r[2]:r[3]]}
			if r[4] >= 0 {
				c.part = refs[r[4]:r[5]]
			}
			out = append(out, c)
		}
	}
	return out
}

// checkCitations returns what is wrong with the citations of one Go file (name is for the
// messages) against the sections of the design notes.
func checkCitations(name, text string, sections map[string]*designSection) (found int, problems []string) {
	for _, c := range citations(text) {
		found++
		where := name + ":" + strconv.Itoa(c.line)
		s, ok := sections[c.section]
		switch {
		case !ok:
			problems = append(problems, where+": cites §"+c.section+", which docs/design.md has no heading for")
		case c.part != "" && !s.has(c.part):
			problems = append(problems, where+": cites §"+c.section+" \""+c.part+"\", which is neither the title nor a heading of §"+c.section+" in docs/design.md ("+s.title+")")
		}
		if strings.HasPrefix(c.doc, "DESIGN") {
			problems = append(problems, where+": cites "+c.doc+" §"+c.section+", a file outside the repository: write docs/design.md §"+c.section)
		}
	}
	return found, problems
}

// TestDesignSections: design.md keeps the numbering the code cites, §1 to §13 and §6b, and
// §4's parts.
func TestDesignSections(t *testing.T) {
	data, err := os.ReadFile("design.md")
	if err != nil {
		t.Fatal(err)
	}
	sections := designSections(string(data))
	for _, want := range []string{"1", "2", "3", "4", "5", "6", "6b", "7", "8", "9", "10", "11", "12", "13"} {
		if sections[want] == nil {
			t.Errorf("docs/design.md has no section §%s (a heading \"## %s. Title\")", want, want)
		}
	}
	if s := sections["4"]; s != nil {
		for _, part := range []string{"Journal", "Resume", "Crash model", "Power loss", "Node reboots", "One run model", "The watch", "Backups"} {
			if !s.has(part) {
				t.Errorf("docs/design.md §4 has no heading %q", part)
			}
		}
	}
}

// TestDesignCitations: every citation of the design notes in the repository's Go files
// (`docs/design.md §4`, `§4 "Crash model"`, `§6b`) names a section docs/design.md has, and a
// quoted part names that section or one of its headings.
func TestDesignCitations(t *testing.T) {
	data, err := os.ReadFile("design.md")
	if err != nil {
		t.Fatal(err)
	}
	sections := designSections(string(data))
	total := 0
	err = filepath.WalkDir(repoRoot, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != repoRoot && strings.HasPrefix(d.Name(), ".") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || !d.Type().IsRegular() {
			return nil
		}
		text, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(repoRoot, p)
		found, problems := checkCitations(filepath.ToSlash(rel), string(text), sections)
		total += found
		for _, msg := range problems {
			t.Error(msg)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if total < 5 {
		t.Fatalf("found only %d citations of docs/design.md in the repository's Go files: the test no longer reads them", total)
	}
}

// TestCheckCitations: the check finds citations in the forms the code writes them, and
// fails those that do not resolve.
func TestCheckCitations(t *testing.T) {
	// The texts write @ for the section sign, so that this file holds no citations itself.
	sections := designSections(strings.ReplaceAll("# t\n\n## 4. The stage machine\n\n### Crash model\n\n## 6b. Path policy\n\n## 9. Hardening (files)\n\n```\n## 7. In code\n```\n", "@", "§"))
	for _, c := range []struct {
		text     string
		found    int
		problems []string
	}{
		{"// the table of docs/design.md @4.", 1, nil},
		{"// (docs/design.md @4, \"Crash model\") and design.md @6b", 2, nil},
		{"// archives (docs/design.md @4 \"Backups\", @9 \"Hardening\")", 2, []string{`f.go:1: cites @4 "Backups", which is neither`}},
		{"// failed nodes (docs/design.md\n\t// @7): the budget", 1, []string{"f.go:2: cites @7, which docs/design.md has no heading for"}},
		{"x := 1\n// (DESIGN @4) and docs/design.md @4 and @12", 3, []string{"f.go:2: cites DESIGN @4, a file outside", "f.go:2: cites @12, which"}},
		{"// design.md @4, and @6b \"Path\" or\n\t// @9 \"Hardening\"; @7", 3, nil},
		{"// a design with section signs: @4 alone is no citation", 0, nil},
	} {
		c.text = strings.ReplaceAll(c.text, "@", "§")
		found, problems := checkCitations("f.go", c.text, sections)
		if found != c.found {
			t.Errorf("%q: %d citations found, want %d", c.text, found, c.found)
		}
		if len(problems) != len(c.problems) {
			t.Errorf("%q: problems %q, want %d like %q", c.text, problems, len(c.problems), c.problems)
			continue
		}
		for i, want := range c.problems {
			if want = strings.ReplaceAll(want, "@", "§"); !strings.HasPrefix(problems[i], want) {
				t.Errorf("%q: problem %q, want one beginning %q", c.text, problems[i], want)
			}
		}
	}
}

package main

import (
	"bufio"
	"encoding"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/cutover/cutover/upgrade/config"
)

// repoRoot is the repository's root, seen from this package's directory.
const repoRoot = "../.."

// mdLink matches a Markdown link or image, [text](target) or ![alt](target), with the target
// in group 1; a title after the target is not used in these docs.
var mdLink = regexp.MustCompile(`!?\[[^\]]*\]\(([^)\s]+)\)`)

// docLinks returns the link targets of a Markdown text, leaving out those inside code
// (fenced blocks and backquoted spans), which are not links.
func docLinks(text string) []string {
	var out []string
	fenced := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		line = regexp.MustCompile("`[^`]*`").ReplaceAllString(line, "")
		for _, m := range mdLink.FindAllStringSubmatch(line, -1) {
			out = append(out, m[1])
		}
	}
	return out
}

// external reports whether a link leaves the documents (a URL or a mail address).
func external(target string) bool {
	return regexp.MustCompile(`^[a-z][a-z0-9+.-]*:`).MatchString(target)
}

// anchors returns the anchors GitHub makes of a Markdown text's headings: lower case, spaces
// as hyphens, punctuation other than hyphens and underscores dropped.
func anchors(text string) map[string]bool {
	out := map[string]bool{}
	fenced := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
		}
		if fenced || !strings.HasPrefix(line, "#") {
			continue
		}
		title := strings.ToLower(strings.TrimSpace(strings.TrimLeft(line, "#")))
		var b strings.Builder
		for _, r := range title {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127:
				b.WriteRune(r)
			}
		}
		out[b.String()] = true
	}
	return out
}

// checkLinks checks every relative link of one document: its file or directory exists
// (exists answers for a path relative to the root of the documents), and an anchor names a
// heading of the Markdown file it points into (read reads one).
func checkLinks(t *testing.T, name, text string, exists func(string) bool, read func(string) (string, error)) {
	t.Helper()
	for _, target := range docLinks(text) {
		if external(target) {
			continue
		}
		file, anchor, _ := strings.Cut(target, "#")
		resolved := name
		if file != "" {
			resolved = path.Clean(path.Join(path.Dir(name), file))
			if strings.HasPrefix(resolved, "../") || !exists(resolved) {
				t.Errorf("%s links to %s, which does not exist", name, target)
				continue
			}
		}
		if anchor == "" || !strings.HasSuffix(resolved, ".md") {
			continue
		}
		doc, err := read(resolved)
		if err != nil {
			t.Errorf("%s links to %s: %v", name, target, err)
			continue
		}
		if !anchors(doc)[anchor] {
			t.Errorf("%s links to %s, and %s has no heading #%s", name, target, resolved, anchor)
		}
	}
}

// repoDocs are the operator documents of the repository: README.md and docs/*.md.
func repoDocs(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob(filepath.Join(repoRoot, "docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	out := []string{"README.md"}
	for _, d := range docs {
		out = append(out, "docs/"+filepath.Base(d))
	}
	return out
}

// TestDocsLinks: every relative link of README.md and docs/*.md names a file or directory of
// the repository, and every anchor a heading of the document it points into.
func TestDocsLinks(t *testing.T) {
	read := func(name string) (string, error) {
		data, err := os.ReadFile(filepath.Join(repoRoot, name))
		return string(data), err
	}
	exists := func(name string) bool {
		_, err := os.Stat(filepath.Join(repoRoot, name))
		return err == nil
	}
	docs := repoDocs(t)
	if len(docs) < 5 {
		t.Fatalf("only %d documents found: %v", len(docs), docs)
	}
	for _, name := range docs {
		text, err := read(name)
		if err != nil {
			t.Fatal(err)
		}
		checkLinks(t, name, text, exists, read)
	}
}

// shippedDoc is a document file the Debian package installs: where it comes from in the
// repository and the link rewrites applied on the way.
type shippedDoc struct {
	src      string
	rewrites [][2]string // literal old, new
}

// packageDocs reads packaging/build-deb.sh for the files it installs under
// /usr/share/doc/cutover: their paths there, relative to that directory. It knows the forms
// the script uses (an install of one file, a for loop over names, a sed of literal
// replacements), and fails on any other line that copies a repository file there, so that
// the check below cannot miss a document.
func packageDocs(t *testing.T) map[string]shippedDoc {
	t.Helper()
	f, err := os.Open(filepath.Join(repoRoot, "packaging", "build-deb.sh"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var (
		install = regexp.MustCompile(`^install\b.* "\$repo/([^"$]+)" "\$doc/([^"$]+)"$`)
		loop    = regexp.MustCompile(`^for f in ([^;$]+); do$`)
		inLoop  = regexp.MustCompile(`^install\b.* "\$repo/([^"$]*)\$f" "\$doc/([^"$]*)\$f"$`)
		sed     = regexp.MustCompile(`^sed((?: -e '[^']*')+) "\$repo/([^"$]+)" >"\$doc/([^"$]+)"$`)
		expr    = regexp.MustCompile(`-e 's#([^#']*)#([^#']*)#g'`)
	)
	out := map[string]shippedDoc{}
	var names []string // of the for loop being read
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if m := loop.FindStringSubmatch(line); m != nil {
			names = strings.Fields(m[1])
			continue
		}
		if line == "done" {
			names = nil
			continue
		}
		if !strings.Contains(line, `"$repo/`) || !strings.Contains(line, `"$doc/`) {
			continue
		}
		switch m := install.FindStringSubmatch(line); {
		case m != nil:
			out[m[2]] = shippedDoc{src: m[1]}
			continue
		}
		if m := inLoop.FindStringSubmatch(line); m != nil && names != nil {
			for _, name := range names {
				out[m[2]+name] = shippedDoc{src: m[1] + name}
			}
			continue
		}
		if m := sed.FindStringSubmatch(line); m != nil {
			d := shippedDoc{src: m[2]}
			for _, e := range expr.FindAllStringSubmatch(m[1], -1) {
				d.rewrites = append(d.rewrites, [2]string{e[1], e[2]})
			}
			out[m[3]] = d
			continue
		}
		t.Fatalf("packaging/build-deb.sh:%d installs a document in a way this test does not read: %s", n, line)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestPackageDocsLinks: the documents the Debian package installs link only to what the
// package installs beside them (the guide must not send an operator to a file that exists in
// the repository alone), and every document of docs/ an installed document links to is
// installed too.
func TestPackageDocsLinks(t *testing.T) {
	shipped := packageDocs(t)
	for _, want := range []string{"README.md", "guide.md", "configuration.md"} {
		if _, ok := shipped[want]; !ok {
			t.Fatalf("packaging/build-deb.sh does not seem to install %s (found %v)", want, shipped)
		}
	}
	read := func(name string) (string, error) {
		d, ok := shipped[name]
		if !ok {
			return "", fmt.Errorf("%s is not installed", name)
		}
		data, err := os.ReadFile(filepath.Join(repoRoot, d.src))
		text := string(data)
		for _, r := range d.rewrites {
			text = strings.ReplaceAll(text, r[0], r[1])
		}
		return text, err
	}
	exists := func(name string) bool {
		for p := range shipped {
			if p == name || strings.HasPrefix(p, name+"/") {
				return true
			}
		}
		return false
	}
	var names []string
	for name := range shipped {
		if strings.HasSuffix(name, ".md") {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	for _, name := range names {
		text, err := read(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, target := range docLinks(text) {
			if strings.HasSuffix(strings.Split(target, "#")[0], ".go") {
				t.Errorf("the installed %s links to Go source %s", name, target)
			}
		}
		checkLinks(t, "/usr/share/doc/cutover/"+name, text, func(p string) bool {
			return exists(strings.TrimPrefix(p, "/usr/share/doc/cutover/"))
		}, func(p string) (string, error) { return read(strings.TrimPrefix(p, "/usr/share/doc/cutover/")) })
	}
}

// configKeys returns every key cutover.toml accepts, as section.key ("paths.libdir",
// "cluster.node.name"; a top-level key alone), from the toml tags of the config struct.
func configKeys(t reflect.Type, prefix string) []string {
	var out []string
	unmarshaler := reflect.TypeOf((*encoding.TextUnmarshaler)(nil)).Elem()
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag, _, _ := strings.Cut(f.Tag.Get("toml"), ",")
		if tag == "" || tag == "-" {
			continue
		}
		ft := f.Type
		if ft.Kind() == reflect.Slice {
			ft = ft.Elem()
		}
		if ft.Kind() == reflect.Struct && !reflect.PointerTo(ft).Implements(unmarshaler) {
			out = append(out, configKeys(ft, prefix+tag+".")...)
			continue
		}
		out = append(out, prefix+tag)
	}
	return out
}

// docKeys returns the keys docs/configuration.md documents: the backquoted names in the first
// column of each section's table, and for an array of tables (`[[cluster.node]]`) the
// backquoted names of its row.
func docKeys(text string) []string {
	heading := regexp.MustCompile("^## (?:Top level|`\\[([a-z_]+)\\]`)$")
	code := regexp.MustCompile("`([^`]+)`")
	var out []string
	section, inSection := "", false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, "## ") {
			m := heading.FindStringSubmatch(line)
			inSection = m != nil
			if m != nil {
				section = m[1]
			}
			continue
		}
		if !inSection || !strings.HasPrefix(line, "| `") {
			continue
		}
		cells := strings.Split(line, "|")
		first := code.FindAllStringSubmatch(cells[1], -1)
		prefix := ""
		if section != "" {
			prefix = section + "."
		}
		if len(first) == 1 && strings.HasPrefix(first[0][1], "[[") {
			table := strings.Trim(first[0][1], "[]")
			for _, m := range code.FindAllStringSubmatch(cells[2], -1) {
				out = append(out, table+"."+m[1])
			}
			continue
		}
		for _, m := range first {
			out = append(out, prefix+m[1])
		}
	}
	return out
}

// TestDocsConfigKeys: docs/configuration.md documents every key cutover.toml accepts, and no
// key it does not.
func TestDocsConfigKeys(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(repoRoot, "docs", "configuration.md"))
	if err != nil {
		t.Fatal(err)
	}
	keys := configKeys(reflect.TypeOf(config.Config{}), "")
	documented := docKeys(string(data))
	if len(keys) < 40 || len(documented) < 40 {
		t.Fatalf("found %d keys in the config struct and %d in docs/configuration.md: the test no longer reads them", len(keys), len(documented))
	}
	for _, k := range keys {
		if !slices.Contains(documented, k) {
			t.Errorf("config key %s is not documented in docs/configuration.md", k)
		}
	}
	for _, k := range documented {
		if !slices.Contains(keys, k) {
			t.Errorf("docs/configuration.md documents %s, which is no config key", k)
		}
	}
	// Keys named in the text of the operator documents, as `section.key` or `[section] key`,
	// are keys too; files whose names look like keys are not.
	files := map[string]bool{"config.data": true} // Ganeti's config
	sections := map[string]bool{}
	for _, k := range keys {
		if section, _, ok := strings.Cut(k, "."); ok {
			sections[section] = true
		}
	}
	named := regexp.MustCompile("`(?:([a-z_]+)\\.([a-z_]+)|\\[([a-z_]+)\\] ([a-z_]+))")
	for _, doc := range repoDocs(t) {
		data, err := os.ReadFile(filepath.Join(repoRoot, doc))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range named.FindAllStringSubmatch(string(data), -1) {
			section, key := m[1]+m[3], m[2]+m[4]
			if sections[section] && !files[section+"."+key] && !slices.Contains(keys, section+"."+key) {
				t.Errorf("%s names %s.%s, which is no config key", doc, section, key)
			}
		}
	}
}

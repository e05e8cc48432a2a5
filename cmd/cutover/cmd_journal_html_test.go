package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cutover/cutover/journal"
)

// hostileNode is a node name as a tampered node list or journal could hold it: markup, an
// entity, quotes and an escape sequence.
const hostileNode = "\x1b[31m<img src=x onerror=alert(1)>&amp;\"'"

// chromiumDOM opens the page at path in a real headless browser, Debian's chromium, and
// returns the DOM it built. Without chromium the test is skipped, unless CI is "true": then
// it fails (test/setup.sh installs it).
func chromiumDOM(t *testing.T, path string) string {
	t.Helper()
	bin, err := exec.LookPath("chromium")
	if err != nil {
		why := "no chromium to open the timeline page in (test/setup.sh installs Debian's)"
		if os.Getenv("CI") == "true" {
			t.Fatal(why)
		}
		t.Skip(why + " (with CI=true this is a failure)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	args := []string{"--headless", "--disable-gpu", "--no-first-run", "--user-data-dir=" + t.TempDir(), "--dump-dom", "file://" + path}
	if os.Geteuid() == 0 {
		args = append([]string{"--no-sandbox"}, args...) // chromium refuses root otherwise
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil || !strings.Contains(string(out), "</html>") {
		t.Fatalf("chromium --dump-dom %s: %v\n%s\n%s", path, err, out, stderr.String())
	}
	return string(out)
}

// TestJournalTimelineHTML writes the timeline page of a real run with --html, opens it in
// headless chromium and finds in the DOM the node's row, its bars with their times, and the
// downtime window; the file is 0600 and written again in place.
func TestJournalTimelineHTML(t *testing.T) {
	lc := newLocalCluster(t, "1.0.0", "1.0.0", "1.1.0")
	if code, out, errOut := lc.cutover("upgrade", "--to=1.1.0", "--yes"); code != 0 {
		t.Fatalf("upgrade exit %d\n%s%s", code, out, errOut)
	}
	page := filepath.Join(t.TempDir(), "run1.html")
	for range 2 { // the second time replaces the first page
		code, out, errOut := lc.cutover("journal", "1", "--timeline", "--html="+page)
		if code != 0 || errOut != "" || out != "timeline of run 1 written to "+page+"\n" {
			t.Fatalf("journal 1 --timeline --html: exit %d, stdout %q, stderr %q", code, out, errOut)
		}
	}
	if fi, err := os.Stat(page); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the page: %v, %v; want a file of mode 0600", fi, err)
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(page), ".*.tmp")); len(left) > 0 {
		t.Errorf("temporary files left beside the page: %v", left)
	}
	dom := chromiumDOM(t, page)
	host, _ := os.Hostname()
	wantDOM(t, dom, []string{
		`<g class="row" data-node="` + host + `">`,
		`<g id="downtime" class="downtime-window">`,
		`<rect class="downtime" `,
		`<rect class="bar stop" `, `<rect class="bar start" `,
		`<title>` + host + `: stop (stop-master), `,
		`<td>` + host + `</td><td>stop</td><td>stop-master</td>`,
		`<td>cluster</td>`,
	})
}

// TestJournalTimelineHostile draws a journal that holds a node name and an error made of
// markup and an escape sequence: the page opened in chromium shows them as text, never as
// elements, every node's row and the window are there; the terminal gets them escaped.
func TestJournalTimelineHostile(t *testing.T) {
	lc := newLocalCluster(t, "1.0.0", "1.0.0", "1.1.0")
	hostileRun(t, lc)
	page := filepath.Join(t.TempDir(), "hostile.html")
	if code, out, errOut := lc.cutover("journal", "--timeline", "--html", page, "1"); code != 0 {
		t.Fatalf("journal --timeline --html: exit %d\n%s%s", code, out, errOut)
	}
	raw, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	dom := chromiumDOM(t, page)
	for name, s := range map[string]string{"page": string(raw), "DOM": dom} {
		if m := regexp.MustCompile(`(?i)<(img|script|iframe)\b|onerror=alert\(1\)>|\x1b`).FindString(s); m != "" {
			t.Errorf("the %s holds %q: a string of the journal became markup or stayed raw", name, m)
		}
	}
	if n := strings.Count(dom, `<g class="row" data-node=`); n != 3 {
		t.Errorf("the DOM has %d node rows, want 3", n)
	}
	wantDOM(t, dom, []string{
		`data-node="node1"`, `data-node="node2"`,
		`&lt;img src=x onerror=alert(1)&gt;&amp;amp;"'`,
		`&lt;/title&gt;&lt;script&gt;alert(2)&lt;/script&gt;`,
		`<rect class="downtime" `,
	})
	code, out, errOut := lc.cutover("journal", "--timeline", "1")
	if code != 0 || strings.ContainsRune(out, 0x1b) || !strings.Contains(out, `\u001b[31m<img`) {
		t.Errorf("journal --timeline on a terminal: exit %d, stderr %q; want the escape sequence escaped:\n%s", code, errOut, out)
	}
}

// wantDOM checks that dom holds each of want.
func wantDOM(t *testing.T, dom string, want []string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(dom, w) {
			t.Errorf("the DOM lacks %q:\n%s", w, dom)
		}
	}
}

// hostileRun puts a run of three nodes in lc's journal, one of them named hostileNode, whose
// start failed on node2 with an error made of markup.
func hostileRun(t *testing.T, lc *localCluster) {
	t.Helper()
	ctx := context.Background()
	if err := os.MkdirAll(lc.path("state"), 0o700); err != nil {
		t.Fatal(err)
	}
	s := journal.NewStore(lc.path("state/journal.db"))
	t0 := time.Date(2026, 3, 14, 9, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	nodes := []string{"node1", "node2", hostileNode}
	r, err := s.CreateRun(ctx, journal.Run{Kind: "upgrade", From: "1.0.0", To: "1.1.0", Direction: "upgrade", Host: "node1", PID: 1, Started: t0,
		Facts: map[string]string{"down.node1": at(100).Format(time.RFC3339Nano), "up.node1": at(5000).Format(time.RFC3339Nano),
			"down." + hostileNode: at(200).Format(time.RFC3339Nano), "up." + hostileNode: at(5200).Format(time.RFC3339Nano),
			"down.node2": at(300).Format(time.RFC3339Nano)}})
	if err != nil {
		t.Fatal(err)
	}
	stage := func(name string, from, to int, fail string) {
		var res []journal.NodeResult
		for i, n := range nodes {
			nr := journal.NodeResult{Node: n, OK: true, Start: at(from + 100*i), End: at(to + 100*i)}
			if n == fail {
				nr.OK, nr.Error = false, "node2: </title><script>alert(2)</script>"
			}
			res = append(res, nr)
		}
		if _, err := s.Record(ctx, r.ID, journal.Event{Stage: name, State: journal.Started, At: at(from)}); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Record(ctx, r.ID, journal.Event{Stage: name, State: journal.Done, At: at(to + 300), Nodes: res}); err != nil {
			t.Fatal(err)
		}
	}
	stage("stop-nodes", 100, 1000, "")
	stage("switch", 2000, 2100, "")
	stage("start", 3000, 5000, "node2")
	if err := s.Finish(ctx, r.ID, journal.FailedPastPONR, at(6000)); err != nil {
		t.Fatal(err)
	}
}

// TestJournalTimelineHTMLRefusesLinks: a link at FILE, whether to a file or dangling, and a
// directory there are refused with exit code 2; nothing is written through the link or
// beside it.
func TestJournalTimelineHTMLRefusesLinks(t *testing.T) {
	lc := newLocalCluster(t, "1.0.0", "1.0.0", "1.1.0")
	if code, out, errOut := lc.cutover("upgrade", "--to=1.1.0", "--yes"); code != 0 {
		t.Fatalf("upgrade exit %d\n%s%s", code, out, errOut)
	}
	dir := t.TempDir()
	target := filepath.Join(dir, "target")
	if err := os.WriteFile(target, []byte("keep me\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, want string
		make       func(path string) error
	}{
		{"link", "is a symbolic link", func(p string) error { return os.Symlink(target, p) }},
		{"dangling", "is a symbolic link", func(p string) error { return os.Symlink(filepath.Join(dir, "nowhere"), p) }},
		{"directory", "not a regular file", func(p string) error { return os.Mkdir(p, 0o755) }},
	} {
		page := filepath.Join(dir, tt.name+".html")
		if err := tt.make(page); err != nil {
			t.Fatal(err)
		}
		code, _, errOut := lc.cutover("journal", "--timeline", "--html="+page, "1")
		if code != exitUsage || !strings.Contains(errOut, tt.want) {
			t.Errorf("%s at FILE: exit %d, stderr %q; want %d and %q", tt.name, code, errOut, exitUsage, tt.want)
		}
	}
	if data, _ := os.ReadFile(target); string(data) != "keep me\n" {
		t.Errorf("the link's target now holds %q", data)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 4 {
		t.Errorf("%d entries in FILE's directory, want the target, two links and a directory: %v", len(entries), entries)
	}
	if _, err := os.Lstat(filepath.Join(dir, "nowhere")); !os.IsNotExist(err) {
		t.Errorf("a file was created through the dangling link: %v", err)
	}
}

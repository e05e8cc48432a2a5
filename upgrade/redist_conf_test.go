package upgrade

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestWatchScript runs the script that reads restart_watch's files with the local shell:
// globs expand, a path with a space is one path, an entry with a leading ! leaves out what
// it matches, what matches nothing or is not a regular file prints nothing, and a changed
// file changes the output.
func TestWatchScript(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	write := func(name, data string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("ssconf_master", "node1\n")
	write("ssconf_nodes", "node1\nnode2\n")
	write("two words", "x")
	write("ssconf_hvparams_kvm", "a")
	write("ssconf_release_version", "3.0.2")
	if err := os.Mkdir(filepath.Join(dir, "ssconf_dir"), 0o700); err != nil {
		t.Fatal(err)
	}
	run := func() string {
		out, err := exec.Command("sh", "-c", watchScript, "cutover-watch",
			dir+"/ssconf_*", dir+"/two words", dir+"/missing", dir+"/none_*",
			"!"+dir+"/ssconf_hvparams_*", "!"+dir+"/ssconf_release_version").Output()
		if err != nil {
			t.Fatalf("watch script: %v", err)
		}
		return string(out)
	}
	first := run()
	var names []string
	for _, line := range strings.Split(strings.TrimSpace(first), "\n") {
		_, name, _ := strings.Cut(line, "  ")
		names = append(names, filepath.Base(name))
	}
	if got, want := strings.Join(names, ","), "ssconf_master,ssconf_nodes,two words"; got != want {
		t.Errorf("files read: %s, want %s\n%s", got, want, first)
	}
	if run() != first {
		t.Error("the same files read twice differ")
	}
	write("ssconf_hvparams_kvm", "b")
	if run() != first {
		t.Error("a file left out changes the output")
	}
	write("ssconf_nodes", "node1\nnode2\nnode3\n")
	second := run()
	if second == first {
		t.Error("a changed file does not change the output")
	}
	if got := changedFiles(first, second); len(got) != 1 || got[0] != "ssconf_nodes" {
		t.Errorf("changed files %q, want ssconf_nodes", got)
	}
	if got := changedFiles(second, ""); len(got) != 3 || got[0] != "ssconf_master (gone)" {
		t.Errorf("changed files %q, want three gone", got)
	}
}

package upgrade

import (
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestPrunable checks what prune removes on one node from what the cluster protects: the
// live version, the journal's previous one, a pending run's, versions newer than the live one
// unless named, the Keep newest unless named.
func TestPrunable(t *testing.T) {
	t.Parallel()
	installed := []string{"1.10.0", "0.8.0", "1.0.0", "0.9.0", "1.1.0", "1.2.0"}
	named := func(v ...string) map[string]bool {
		m := map[string]bool{}
		for _, x := range v {
			m[x] = true
		}
		return m
	}
	tests := []struct {
		name  string
		guard pruneGuard
		keep  int
		want  []string
	}{
		{"keep none: newer ones stay", pruneGuard{live: "1.0.0"}, 0, []string{"0.8.0"}},
		{"named newer ones go", pruneGuard{live: "1.0.0", named: named("1.1.0", "1.10.0")}, 0, []string{"0.8.0", "1.1.0", "1.10.0"}},
		{"keep the newest two", pruneGuard{live: "1.0.0"}, 2, []string{"0.8.0"}},
		{"the journal's previous", pruneGuard{live: "1.0.0", previous: []string{"0.8.0", "1.0.0"}}, 0, []string{"0.9.0"}},
		{"a pending run's versions", pruneGuard{pending: []string{"1.0.0", "1.1.0"}, previous: []string{"0.9.0", "1.0.0"}}, 0, []string{"0.8.0"}},
		{"a pending run's, the live and named", pruneGuard{live: "1.0.0", pending: []string{"1.0.0", "1.1.0"}, named: named("1.1.0", "1.2.0")}, 1,
			[]string{"0.8.0", "1.2.0"}},
		{"live is the oldest", pruneGuard{live: "0.8.0"}, 0, nil},
		{"live is the newest", pruneGuard{live: "1.10.0"}, 0, []string{"0.8.0", "0.9.0", "1.0.0", "1.1.0"}},
		{"keep more than installed", pruneGuard{live: "1.10.0"}, 10, nil},
		{"named never the live or previous", pruneGuard{live: "1.0.0", previous: []string{"0.9.0", "1.0.0"}, named: named("1.0.0", "0.9.0")}, 0,
			[]string{"0.8.0"}},
		// A jump from 1.0 to 1.2: the way back is 1.1, the previous minor, not 1.0.
		{"the previous minor after a jump", pruneGuard{live: "1.2.0", previous: []string{"1.0.0", "1.2.0"}}, 0,
			[]string{"0.8.0", "0.9.0", "1.0.0"}},
	}
	for _, tt := range tests {
		got := prunable(installed, tt.guard, tt.keep)
		if !slices.Equal(got, tt.want) {
			t.Errorf("%s: prunable = %v, want %v", tt.name, got, tt.want)
		}
	}
}

// TestPruneScript runs the prune's script with the local shell on trees in a temporary
// directory: what it removes, what an interrupted prune left and it finishes, and what it
// leaves alone.
func TestPruneScript(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		before   []string // entries below the root: dirs end in "/", "a -> b" is a link
		versions []string
		after    []string
		out      string
	}{
		{"removes both trees and their manifests",
			[]string{"share/0.9.0/", "lib/0.9.0/", "lib/0.9.0/bin", "lib/.0.9.0.cutover-manifest", "share/1.0.0/", "lib/1.0.0/"},
			[]string{"0.9.0"},
			[]string{"share/1.0.0/", "lib/1.0.0/"}, ""},
		{"finishes a prune interrupted between the two renames",
			[]string{"share/.0.9.0.cutover-prune/", "lib/0.9.0/", "lib/0.9.0/bin", "lib/.0.9.0.cutover-manifest", "share/1.0.0/", "lib/1.0.0/"},
			nil,
			[]string{"share/1.0.0/", "lib/1.0.0/"}, "finished an interrupted prune of 0.9.0\n"},
		{"clears the leftovers of a prune interrupted in its removals",
			[]string{"share/.0.9.0.cutover-prune/", "lib/.0.9.0.cutover-prune/", "lib/.0.9.0.cutover-prune/bin", "share/1.0.0/", "lib/1.0.0/"},
			nil,
			[]string{"share/1.0.0/", "lib/1.0.0/"}, ""},
		{"keeps a version staged again after an interrupted prune",
			[]string{"share/.0.9.0.cutover-prune/", "share/0.9.0/", "lib/0.9.0/"},
			nil,
			[]string{"share/0.9.0/", "lib/0.9.0/"}, ""},
		{"keeps a lib tree with no prune of its share tree",
			[]string{"lib/0.9.0/", "share/1.0.0/", "lib/1.0.0/"},
			nil,
			[]string{"lib/0.9.0/", "share/1.0.0/", "lib/1.0.0/"}, ""},
		{"follows no link",
			[]string{"outside/", "outside/keep", "share/.0.9.0.cutover-prune -> ../outside", "lib/0.9.0 -> ../outside"},
			nil,
			[]string{"outside/", "outside/keep", "lib/0.9.0 -> ../outside"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			root := t.TempDir()
			for _, d := range []string{"share", "lib"} {
				if err := os.Mkdir(filepath.Join(root, d), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			for _, e := range tt.before {
				p := filepath.Join(root, strings.TrimSuffix(e, "/"))
				var err error
				switch name, target, link := strings.Cut(e, " -> "); {
				case link:
					err = os.Symlink(target, filepath.Join(root, name))
				case strings.HasSuffix(e, "/"):
					err = os.Mkdir(p, 0o755)
				default:
					err = os.WriteFile(p, []byte("x"), 0o644)
				}
				if err != nil {
					t.Fatal(err)
				}
			}
			argv := append([]string{"-c", pruneScript, "cutover-prune", filepath.Join(root, "share"), filepath.Join(root, "lib")}, tt.versions...)
			out, err := exec.Command("sh", argv...).Output()
			if err != nil {
				t.Fatalf("prune script: %v", err)
			}
			if string(out) != tt.out {
				t.Errorf("output %q, want %q", out, tt.out)
			}
			var got []string
			err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
				if err != nil || p == root {
					return err
				}
				rel, _ := filepath.Rel(root, p)
				switch {
				case rel == "share" || rel == "lib":
				case d.Type()&fs.ModeSymlink != 0:
					target, _ := os.Readlink(p)
					rel += " -> " + target
				case d.IsDir():
					rel += "/"
				}
				if rel != "share" && rel != "lib" {
					got = append(got, rel)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			want := slices.Clone(tt.after)
			slices.Sort(want)
			slices.Sort(got)
			if !slices.Equal(got, want) {
				t.Errorf("after the prune:\n got %q\nwant %q", got, want)
			}
		})
	}
}

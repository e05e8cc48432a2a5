package layout

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

func TestLive(t *testing.T) {
	t.Parallel()
	trees := []string{"d usr/lib/app/1.0", "d usr/share/app/1.0", "d usr/lib/app/1.1", "d usr/share/app/1.1"}
	tests := []struct {
		name    string
		mode    string
		tree    []string
		want    string
		check   func(error) bool // the predicate the error must satisfy
		wantMsg []string         // substrings of the error
	}{
		{name: "absolute links", tree: with(trees, "l etc/app/lib /usr/lib/app/1.0", "l etc/app/share /usr/share/app/1.0"), want: "1.0"},
		{name: "relative links are resolved from the link's directory",
			tree: with(trees, "l etc/app/lib ../../usr/lib/app/1.1", "l etc/app/share ../../usr/share/app/1.1"), want: "1.1"},
		{name: "unclean target", tree: with(trees, "l etc/app/lib /usr/lib/app/./1.0/", "l etc/app/share /usr/share/app/1.0"), want: "1.0"},
		{name: "dot-dot through a directory", tree: with(trees, "l etc/app/lib /usr/lib/app/../app/1.0/", "l etc/app/share /usr/share/app/1.0"),
			check: IsNotSideBySide, wantMsg: []string{`/etc/app/lib points to "/usr/lib/app/../app/1.0/"`, "resolved through that directory"}},
		{name: "dot-dot through a link", tree: with(trees, "l usr/lib/app/x /opt", "l etc/app/lib /usr/lib/app/x/../1.0", "l etc/app/share /usr/share/app/1.0"),
			check: IsNotSideBySide, wantMsg: []string{`points to "/usr/lib/app/x/../1.0"`}},
		{name: "dangling links still name the live version", tree: []string{"l etc/app/lib /usr/lib/app/2.0", "l etc/app/share /usr/share/app/2.0"}, want: "2.0"},
		{name: "full version dirs", mode: "full", tree: []string{"l etc/app/lib /usr/lib/app/1.0.3", "l etc/app/share /usr/share/app/1.0.3"}, want: "1.0.3"},
		{name: "disagree", tree: with(trees, "l etc/app/lib /usr/lib/app/1.0", "l etc/app/share /usr/share/app/1.1"),
			check: IsDisagree, wantMsg: []string{"/etc/app/lib points to version 1.0 but /etc/app/share points to version 1.1"}},
		{name: "plain directory", tree: with(trees, "d etc/app/lib", "l etc/app/share /usr/share/app/1.0"),
			check: IsNotSideBySide, wantMsg: []string{"/etc/app/lib is a directory, not a symlink"}},
		{name: "plain file", tree: with(trees, "l etc/app/lib /usr/lib/app/1.0", "f etc/app/share"),
			check: IsNotSideBySide, wantMsg: []string{"/etc/app/share is a regular file, not a symlink"}},
		{name: "both missing", tree: trees,
			check: IsNotSideBySide, wantMsg: []string{"/etc/app/lib is missing", "/etc/app/share is missing"}},
		{name: "share missing", tree: with(trees, "l etc/app/lib /usr/lib/app/1.0"),
			check: IsNotSideBySide, wantMsg: []string{"/etc/app/share is missing"}},
		{name: "points elsewhere", tree: with(trees, "l etc/app/lib /opt/app/1.0", "l etc/app/share /usr/share/app/1.0"),
			check: IsNotSideBySide, wantMsg: []string{`/etc/app/lib points to "/opt/app/1.0", not to a version directory in /usr/lib/app/`}},
		{name: "lib link into the share trees", tree: with(trees, "l etc/app/lib /usr/share/app/1.0", "l etc/app/share /usr/share/app/1.0"),
			check: IsNotSideBySide, wantMsg: []string{`/etc/app/lib points to "/usr/share/app/1.0"`}},
		{name: "relative target escaping", tree: with(trees, "l etc/app/lib ../lib/app/1.0", "l etc/app/share /usr/share/app/1.0"),
			check: IsNotSideBySide, wantMsg: []string{`/etc/app/lib points to "../lib/app/1.0"`}},
		{name: "points into a tree", tree: with(trees, "l etc/app/lib /usr/lib/app/1.0/usr", "l etc/app/share /usr/share/app/1.0"),
			check: IsNotSideBySide, wantMsg: []string{`points to "/usr/lib/app/1.0/usr"`}},
		{name: "points to default", tree: with(trees, "l etc/app/lib /usr/lib/app/default", "l etc/app/share /usr/share/app/1.0"),
			check: IsNotSideBySide, wantMsg: []string{`points to "/usr/lib/app/default"`}},
		{name: "full version with minor dirs", tree: with(trees, "l etc/app/lib /usr/lib/app/1.0.0", "l etc/app/share /usr/share/app/1.0.0"),
			check: IsNotSideBySide, wantMsg: []string{"(version_dirs minor)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			mode := tt.mode
			if mode == "" {
				mode = "minor"
			}
			root := build(t, tt.tree...)
			got, err := newTestLayout(t, mode, root).Live(context.Background(), OSFS{})
			if tt.check == nil {
				if err != nil || got != tt.want {
					t.Fatalf("Live = %q, %v, want %q", got, err, tt.want)
				}
				return
			}
			if err == nil || !tt.check(err) {
				t.Fatalf("Live = %q, %v, want an error of the expected kind", got, err)
			}
			for _, m := range tt.wantMsg {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("Live error %q does not contain %q", err, m)
				}
			}
		})
	}
}

func TestPredicatesAreDistinct(t *testing.T) {
	t.Parallel()
	preds := map[string]func(error) bool{"IsNotSideBySide": IsNotSideBySide, "IsDisagree": IsDisagree, "IsNotInstalled": IsNotInstalled}
	kinds := map[string]kind{"IsNotSideBySide": kindNotSideBySide, "IsDisagree": kindDisagree, "IsNotInstalled": kindNotInstalled}
	for name, k := range kinds {
		err := errors.Join(errors.New("other"), fmt.Errorf("node1: %w", newError(k, "x")))
		for pname, pred := range preds {
			if got := pred(err); got != (pname == name) {
				t.Errorf("%s(wrapped %s error) = %v", pname, name, got)
			}
		}
	}
	for pname, pred := range preds {
		if pred(nil) || pred(errors.New("x")) {
			t.Errorf("%s matches an unrelated error", pname)
		}
	}
}

func TestInstalled(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		mode string
		tree []string
		want []string
	}{
		{name: "both trees", tree: installed, want: []string{"1.0", "1.1"}},
		{name: "only lib does not count", tree: []string{"d usr/lib/app/1.0", "d usr/share/app/1.0", "d usr/lib/app/1.2"}, want: []string{"1.0"}},
		{name: "only share does not count", tree: []string{"d usr/share/app/2.16", "d usr/lib/app/3.0", "d usr/share/app/3.0"}, want: []string{"3.0"}},
		{name: "file instead of a tree", tree: []string{"d usr/lib/app/1.0", "f usr/share/app/1.0"}},
		{name: "symlinked tree counts", tree: []string{"d usr/lib/app/1.0", "d usr/share/app/real-1.0", "l usr/share/app/1.0 real-1.0"}, want: []string{"1.0"}},
		{name: "default and other entries ignored", tree: with(installed,
			"d usr/lib/app/tools", "d usr/share/app/tools", "f usr/lib/app/daemon-util", "d usr/lib/app/1.2.0", "d usr/share/app/1.2.0",
			"d usr/lib/app/v1.3", "d usr/share/app/v1.3"), want: []string{"1.0", "1.1"}},
		{name: "sorted by version", tree: []string{
			"d usr/lib/app/1.10", "d usr/share/app/1.10", "d usr/lib/app/1.9", "d usr/share/app/1.9",
			"d usr/lib/app/1.2", "d usr/share/app/1.2", "d usr/lib/app/2.0", "d usr/share/app/2.0",
			"d usr/lib/app/1.10-rc1", "d usr/share/app/1.10-rc1",
		}, want: []string{"1.2", "1.9", "1.10", "2.0"}},
		{name: "full version dirs", mode: "full", tree: []string{
			"d usr/lib/app/1.0.10", "d usr/share/app/1.0.10", "d usr/lib/app/1.0.9", "d usr/share/app/1.0.9",
			"d usr/lib/app/1.0.10-rc1", "d usr/share/app/1.0.10-rc1",
		}, want: []string{"1.0.9", "1.0.10-rc1", "1.0.10"}},
		{name: "nothing installed", tree: []string{"d etc/app"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			mode := tt.mode
			if mode == "" {
				mode = "minor"
			}
			root := build(t, tt.tree...)
			got, err := newTestLayout(t, mode, root).Installed(context.Background(), OSFS{})
			if err != nil || !slices.Equal(got, tt.want) {
				t.Fatalf("Installed = %q, %v, want %q", got, err, tt.want)
			}
		})
	}
}

func TestCheckInstalled(t *testing.T) {
	t.Parallel()
	root := build(t, "d usr/lib/app/1.0", "d usr/share/app/1.0", "d usr/lib/app/1.1", "d usr/share/app/1.2", "d usr/lib/app/1.3", "f usr/share/app/1.3")
	l := newTestLayout(t, "minor", root)
	tests := []struct {
		version string
		want    string // "" means installed
	}{
		{"1.0", ""},
		{"1.0.7", ""},
		{"1.1.0", "app 1.1.0 is not installed: missing /usr/share/app/1.1"},
		{"1.2", "app 1.2 is not installed: missing /usr/lib/app/1.2"},
		{"1.3", "app 1.3 is not installed: missing /usr/share/app/1.3 (not a directory)"},
		{"2.0", "app 2.0 is not installed: missing /usr/lib/app/2.0 and /usr/share/app/2.0"},
	}
	for _, tt := range tests {
		err := l.CheckInstalled(context.Background(), OSFS{}, mustParse(t, tt.version))
		if tt.want == "" {
			if err != nil {
				t.Errorf("CheckInstalled(%q) = %v, want nil", tt.version, err)
			}
			continue
		}
		if err == nil || !IsNotInstalled(err) || err.Error() != tt.want {
			t.Errorf("CheckInstalled(%q) = %v, want IsNotInstalled error %q", tt.version, err, tt.want)
		}
	}
	// A version that does not parse never reaches CheckInstalled.
	if v, err := ParseVersion("../1.0"); err == nil {
		t.Errorf(`ParseVersion("../1.0") = %v, want an invalid-version error`, v)
	}
}

func TestCanceled(t *testing.T) {
	t.Parallel()
	root := build(t, installed...)
	before := snapshot(t, root)
	l := newTestLayout(t, "minor", root)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := l.Live(ctx, OSFS{}); !errors.Is(err, context.Canceled) {
		t.Errorf("Live = %v, want context.Canceled", err)
	}
	if _, err := l.Installed(ctx, OSFS{}); !errors.Is(err, context.Canceled) {
		t.Errorf("Installed = %v, want context.Canceled", err)
	}
	if err := l.CheckInstalled(ctx, OSFS{}, mustParse(t, "1.1")); !errors.Is(err, context.Canceled) {
		t.Errorf("CheckInstalled = %v, want context.Canceled", err)
	}
	if err := switchTo(ctx, l, OSFS{}, "1.1"); !errors.Is(err, context.Canceled) {
		t.Errorf("Switch = %v, want context.Canceled", err)
	}
	assertUnchanged(t, root, before)
}

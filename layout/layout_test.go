package layout

import (
	"strconv"
	"strings"
	"testing"
)

func TestNew(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name        string
		app         string
		paths       Paths
		versionDirs string
		root        string
		wantErr     string // substring; "" means success
	}{
		{name: "ok minor", app: "ganeti", paths: testPaths, versionDirs: "minor"},
		{name: "ok full with root", app: "demo-app_2+x", paths: testPaths, versionDirs: "full", root: "/tmp/x"},
		{name: "slash root", app: "app", paths: testPaths, versionDirs: "full", root: "/"},
		{name: "empty app", app: "", paths: testPaths, versionDirs: "full", wantErr: `application name ""`},
		{name: "upper-case app", app: "Ganeti", paths: testPaths, versionDirs: "full", wantErr: "application name"},
		{name: "app with slash", app: "../etc", paths: testPaths, versionDirs: "full", wantErr: "application name"},
		{name: "app with space", app: "a b", paths: testPaths, versionDirs: "full", wantErr: "application name"},
		{name: "app starting with dot", app: ".app", paths: testPaths, versionDirs: "full", wantErr: "application name"},
		{name: "relative libdir", app: "app", paths: Paths{"usr/lib", "/usr/share", "/etc", "/var"}, versionDirs: "full", wantErr: "invalid libdir"},
		{name: "unclean datadir", app: "app", paths: Paths{"/usr/lib", "/usr/share/", "/etc", "/var"}, versionDirs: "full", wantErr: "invalid datadir"},
		{name: "dotdot sysconfdir", app: "app", paths: Paths{"/usr/lib", "/usr/share", "/etc/../x", "/var"}, versionDirs: "full", wantErr: "invalid sysconfdir"},
		{name: "empty localstatedir", app: "app", paths: Paths{"/usr/lib", "/usr/share", "/etc", ""}, versionDirs: "full", wantErr: "invalid localstatedir"},
		{name: "newline in path", app: "app", paths: Paths{"/usr/lib\n", "/usr/share", "/etc", "/var"}, versionDirs: "full", wantErr: "invalid libdir"},
		{name: "bad version dirs", app: "app", paths: testPaths, versionDirs: "major", wantErr: `version_dirs "major"`},
		{name: "empty version dirs", app: "app", paths: testPaths, versionDirs: "", wantErr: "version_dirs"},
		{name: "relative root", app: "app", paths: testPaths, versionDirs: "full", root: "tmp/x", wantErr: "invalid root"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			l, err := New(tt.app, tt.paths, tt.versionDirs, tt.root)
			if tt.wantErr == "" {
				if err != nil || l == nil {
					t.Fatalf("New = %v, %v, want a layout", l, err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("New error = %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestValidVersion(t *testing.T) {
	t.Parallel()
	tests := []struct {
		v    string
		good bool
	}{
		{"1.2.0", true},
		{"1.2", true},
		{"0.0.0", true},
		{"3.0.2", true},
		{"10.20.30", true},
		{"1.0.0-rc1", true},
		{"2.16.0-beta.2", true},
		{"1.0.0-x-y", true},
		{"", false},
		{"1", false},
		{"1.", false},
		{"1.2.3.4", false},
		{"v1.0.0", false},
		{" 1.0.0", false},
		{"1.0.0 ", false},
		{"1.0.0\n", false},
		{"1.0.0; rm -rf /", false},
		{"1.0.0$(reboot)", false},
		{"1.0.0`id`", false},
		{"../1.0", false},
		{"99999999999999999999.1.0", false},
		{"999999999.999999999.999999999", true},
		{"1.1234567890.0", false},
		{"1.0/..", false},
		{"1.0.0-", false},
		{"1.0.0-a..b", false},
		{"1.0.0-a/b", false},
		{"1.0.0+build", false},
		{"01.2.0", false},
		{"1.02", false},
		{"-1.0", false},
		{"1.0.0-" + strings.Repeat("a", 64), false},
	}
	for _, tt := range tests {
		err := ValidVersion(tt.v)
		if (err == nil) != tt.good {
			t.Errorf("ValidVersion(%q) = %v, want valid=%v", tt.v, err, tt.good)
		}
		if err != nil && !strings.Contains(err.Error(), strconv.Quote(tt.v)) {
			t.Errorf("ValidVersion(%q) error %q does not quote the input", tt.v, err)
		}
	}
}

func TestDirOf(t *testing.T) {
	t.Parallel()
	tests := []struct {
		mode, version, want string
	}{
		{"full", "1.2.0", "1.2.0"},
		{"full", "1.2", "1.2"},
		{"full", "1.2.0-rc1", "1.2.0-rc1"},
		{"minor", "1.2.0", "1.2"},
		{"minor", "1.2", "1.2"},
		{"minor", "1.10.3", "1.10"},
		{"minor", "3.0.2-rc1", "3.0"},
		{"minor", "3.1-rc1", "3.1"},
	}
	for _, tt := range tests {
		l := newTestLayout(t, tt.mode, "")
		got := l.DirOf(mustParse(t, tt.version))
		if got != tt.want {
			t.Errorf("%s: DirOf(%q) = %q, want %q", tt.mode, tt.version, got, tt.want)
		}
		if again, err := ParseVersion(got); err != nil || l.DirOf(again) != got {
			t.Errorf("%s: DirOf(%q) = %q, %v, want it unchanged", tt.mode, got, again, err)
		}
	}
	// A hostile version never reaches DirOf: it does not parse.
	if got, err := ParseVersion("1.0; rm -rf /"); err == nil {
		t.Errorf("ParseVersion of a hostile version = %q, want an error", got)
	}
}

func TestNames(t *testing.T) {
	t.Parallel()
	l, err := New("ganeti", Paths{LibDir: "/usr/lib64", DataDir: "/opt/share", SysconfDir: "/usr/local/etc", LocalstateDir: "/var"}, "minor", "/ignored/root")
	if err != nil {
		t.Fatal(err)
	}
	lib, share := l.Trees(mustParse(t, "3.0.2"))
	for _, c := range []struct{ name, got, want string }{
		{"lib tree", lib, "/usr/lib64/ganeti/3.0"},
		{"share tree", share, "/opt/share/ganeti/3.0"},
		{"LibLink", l.LibLink(), "/usr/local/etc/ganeti/lib"},
		{"ShareLink", l.ShareLink(), "/usr/local/etc/ganeti/share"},
	} {
		if c.got != c.want {
			t.Errorf("%s = %q, want %q", c.name, c.got, c.want)
		}
	}
	// A version that does not parse never reaches Trees.
	if _, err := ParseVersion("../3.0"); err == nil {
		t.Error(`ParseVersion("../3.0") succeeded, want an error`)
	}
}

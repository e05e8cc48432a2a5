package upgrade

import (
	"strings"
	"testing"

	"github.com/cutover/cutover/layout"
	"github.com/cutover/cutover/upgrade/config"
)

func TestCheckPath(t *testing.T) {
	jump := config.PolicyConfig{AllowMinorJump: true, Downgrade: "previous-minor"}
	noJump := config.PolicyConfig{AllowMinorJump: false, Downgrade: "previous-minor"}
	never := config.PolicyConfig{AllowMinorJump: true, Downgrade: "never"}
	tests := []struct {
		from, to string
		p        config.PolicyConfig
		target   *TargetPolicy
		refused  string // "" = allowed; else a word of the refusal
	}{
		{"1.0.0", "1.1.0", jump, nil, ""},
		{"1.0.0", "1.1.0", noJump, nil, ""},
		{"1.0.0", "1.2.0", jump, nil, ""},
		{"1.0.0", "1.2.0", noJump, nil, "skips a minor"},
		{"1.1.3", "1.1.2", jump, nil, ""},
		{"1.1.2", "1.1.3", never, nil, ""},
		{"1.2.0", "1.1.0", jump, nil, ""},
		{"1.2.0", "1.1.0", never, nil, "does not allow"},
		{"1.2.0", "1.0.0", jump, nil, "previous minor"},
		{"1.9.0", "2.0.0", jump, nil, "major"},
		{"2.0.0", "1.9.0", jump, nil, "major"},
		{"2.16.0", "3.0.0", jump, &TargetPolicy{AllowedFrom: ">= 2.16, < 3.0"}, ""},
		{"2.15.0", "3.0.0", jump, &TargetPolicy{AllowedFrom: ">= 2.16, < 3.0"}, "major"},
		{"2.10.1", "2.11.0", jump, &TargetPolicy{BlockedFrom: []string{"2.10.1"}}, "blocked"},
		{"2.10.2", "2.11.0", jump, &TargetPolicy{BlockedFrom: []string{"2.10.1"}}, ""},
		{"1.0.0", "1.1.0-rc1", jump, nil, ""},
		{"1.1.0-rc1", "1.1.0", noJump, nil, ""},
		{"1.1.0", "1.1.0-rc1", never, nil, ""},
		{"1.2.0-rc1", "1.0.0", jump, nil, "previous minor"},
		{"1.0.0", "1.3.0", noJump, nil, "skips a minor"},
		{"2.16.2", "2.16.0", never, nil, ""},
		// Minor version directories (Ganeti's 3.0 trees) carry full versions from the config.
		{"3.0.0", "3.1.0", noJump, nil, ""},
		{"3.1.0", "3.0.0", jump, nil, ""},
		{"3.0.2", "3.0.9", noJump, nil, ""},
		{"2.16.0", "3.0.0", jump, &TargetPolicy{AllowedFrom: ">= 2.16, < 3.0", BlockedFrom: []string{"2.16.0"}}, "blocked"},
		{"1.0", "1.1.0", jump, nil, ""},
		{"1.0.0", "2.0.0", jump, &TargetPolicy{AllowedFrom: ">= nonsense"}, "allowed_from"},
	}
	for _, tt := range tests {
		errs := CheckPath(mustVersion(t, tt.from), mustVersion(t, tt.to), tt.p, tt.target)
		switch {
		case tt.refused == "" && len(errs) > 0:
			t.Errorf("CheckPath(%s, %s) = %v, want allowed", tt.from, tt.to, errs)
		case tt.refused != "" && (len(errs) == 0 || !strings.Contains(errs[0].Error(), tt.refused)):
			t.Errorf("CheckPath(%s, %s) = %v, want a refusal saying %q", tt.from, tt.to, errs, tt.refused)
		}
	}
}

func TestDirection(t *testing.T) {
	for _, tt := range []struct {
		from, to string
		want     Direction
	}{
		{"1.0.0", "1.1.0", Up}, {"1.1.0", "1.0.0", Down}, {"1.1.0", "1.1.1", Same}, {"1.1.1", "1.1.0", Same},
		{"1.9.0", "2.0.0", Up}, {"2.0.0", "1.9.0", Down},
	} {
		if got := direction(mustVersion(t, tt.from), mustVersion(t, tt.to)); got != tt.want {
			t.Errorf("direction(%s, %s) = %v; want %v", tt.from, tt.to, got, tt.want)
		}
	}
}

// TestNewTarget: a run's versions are parsed where they enter; one that does not parse is
// refused before any policy is asked.
func TestNewTarget(t *testing.T) {
	paths := layout.Paths{LibDir: "/usr/lib", DataDir: "/usr/share", SysconfDir: "/etc", LocalstateDir: "/var"}
	for _, tt := range []struct {
		mode, from, to string
		want           Target // From, To, Direction, FromDir and ToDir
		err            string
	}{
		{"full", "1.0.0", "1.1.0", Target{From: "1.0.0", To: "1.1.0", Direction: Up, FromDir: "1.0.0", ToDir: "1.1.0"}, ""},
		{"minor", "3.1.2", "3.0", Target{From: "3.1.2", To: "3.0", Direction: Down, FromDir: "3.1", ToDir: "3.0"}, ""},
		{"minor", "3.0.1", "3.0.2-rc1", Target{From: "3.0.1", To: "3.0.2-rc1", Direction: Same, FromDir: "3.0", ToDir: "3.0"}, ""},
		{"full", "x", "1.1.0", Target{}, `from: invalid version "x"`},
		{"full", "1.0.0", "1.1.0; reboot", Target{}, `to: invalid version "1.1.0; reboot"`},
		{"full", "1.0.0", "1.1", Target{}, "named in full"},
	} {
		lay, err := layout.New("app", paths, tt.mode, "")
		if err != nil {
			t.Fatal(err)
		}
		got, err := newTarget(lay, tt.from, tt.to)
		if tt.err != "" {
			if err == nil || !strings.Contains(err.Error(), tt.err) {
				t.Errorf("newTarget(%s, %s) = %v, want an error saying %q", tt.from, tt.to, err, tt.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("newTarget(%s, %s) = %v", tt.from, tt.to, err)
			continue
		}
		if got.FromVersion.String() != tt.from || got.ToVersion.String() != tt.to {
			t.Errorf("newTarget(%s, %s) parsed %s and %s", tt.from, tt.to, got.FromVersion, got.ToVersion)
		}
		got.FromVersion, got.ToVersion = layout.Version{}, layout.Version{}
		if got != tt.want {
			t.Errorf("newTarget(%s, %s) = %+v, want %+v", tt.from, tt.to, got, tt.want)
		}
	}
}

func mustVersion(t *testing.T, s string) layout.Version {
	t.Helper()
	v, err := layout.ParseVersion(s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

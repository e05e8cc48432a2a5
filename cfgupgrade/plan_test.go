package cfgupgrade

import (
	"fmt"
	"strings"
	"testing"
)

func TestPlan(t *testing.T) {
	t.Parallel()
	mig := func(from, to string) Migration {
		return Migration{From: from, To: to, File: from + "-" + to + ".json",
			Up:   []Op{{Op: "set", Path: "/up" + to, Value: []byte("1")}},
			Down: []Op{{Op: "remove", Path: "/up" + to}}}
	}
	migs := []Migration{mig("1.0", "1.1"), mig("1.1", "1.2"), mig("1.4", "1.5"), mig("2.0", "2.1")}
	tests := []struct {
		from, to string
		want     string // steps as "from>to:file" or "from>to:=" for identity, up/down ops by first path
		wantErr  string
	}{
		{"1.0.0", "1.0.5", "", ""},
		{"1.1.3", "1.1.0", "", ""},
		{"1.0.0", "1.1.0", "1.0>1.1:1.0-1.1.json(/up1.1)", ""},
		{"1.0.0", "1.2.0", "1.0>1.1:1.0-1.1.json(/up1.1) 1.1>1.2:1.1-1.2.json(/up1.2)", ""},
		{"1.0.2", "1.6.0-rc.1", "1.0>1.1:1.0-1.1.json(/up1.1) 1.1>1.2:1.1-1.2.json(/up1.2) 1.2>1.4:= 1.4>1.5:1.4-1.5.json(/up1.5) 1.5>1.6:=", ""},
		{"1.2.0", "1.4.0", "1.2>1.4:=", ""},
		{"1.2.0", "1.0.0", "1.2>1.1:1.1-1.2.json(/up1.2) 1.1>1.0:1.0-1.1.json(/up1.1)", ""},
		{"1.6.0", "1.1.0", "1.6>1.5:= 1.5>1.4:1.4-1.5.json(/up1.5) 1.4>1.2:= 1.2>1.1:1.1-1.2.json(/up1.2)", ""},
		{"1.1.0", "1.0.0", "1.1>1.0:1.0-1.1.json(/up1.1)", ""},
		{"2.0.0", "2.1.0", "2.0>2.1:2.0-2.1.json(/up2.1)", ""},
		{"3.0.0", "3.999999999.0", "3.0>3.999999999:=", ""},
		{"1.2.0", "2.0.0", "", "1.2.0 to 2.0.0 changes the major version, and no migration file hops from the last minor of 1 to 2.0"},
		{"2.0.0", "1.9.0", "", "changes the major version"},
		{"1.0", "1.1.0", "", `from: version "1.0": not three numbers`},
		{"1.0.0", "x", "", `to: version "x"`},
	}
	// With a hop from 1.6 to 2.0 the majors connect.
	hopped := append([]Migration{mig("1.6", "2.0")}, migs...)
	hopTests := []struct {
		from, to string
		want     string
		wantErr  string
	}{
		{"1.4.0", "2.1.0", "1.4>1.5:1.4-1.5.json(/up1.5) 1.5>1.6:= 1.6>2.0:1.6-2.0.json(/up2.0) 2.0>2.1:2.0-2.1.json(/up2.1)", ""},
		{"1.6.2", "2.0.0", "1.6>2.0:1.6-2.0.json(/up2.0)", ""},
		{"2.1.0", "1.5.0", "2.1>2.0:2.0-2.1.json(/up2.1) 2.0>1.6:1.6-2.0.json(/up2.0) 1.6>1.5:=", ""},
		{"1.7.0", "2.0.0", "", "1.7.0 is past 1.6, where the hop to 2.0 starts"},
		{"1.0.0", "3.0.0", "", "no migration file hops from the last minor of 2 to 3.0"},
	}
	for _, tt := range hopTests {
		steps, err := Plan(hopped, tt.from, tt.to)
		if !errorMatches(err, tt.wantErr) {
			t.Errorf("Plan with a hop (%s, %s) error = %v, want error containing %q", tt.from, tt.to, err, tt.wantErr)
			continue
		}
		var got []string
		for _, s := range steps {
			if s.Identity {
				got = append(got, fmt.Sprintf("%s>%s:=", s.From, s.To))
			} else {
				got = append(got, fmt.Sprintf("%s>%s:%s(%s)", s.From, s.To, s.File, s.Ops[0].Path))
			}
		}
		if g := strings.Join(got, " "); g != tt.want {
			t.Errorf("Plan with a hop (%s, %s) = %s, want %s", tt.from, tt.to, g, tt.want)
		}
	}
	for _, tt := range tests {
		steps, err := Plan(migs, tt.from, tt.to)
		if !errorMatches(err, tt.wantErr) {
			t.Errorf("Plan(%s, %s) error = %v, want error containing %q", tt.from, tt.to, err, tt.wantErr)
			continue
		}
		var got []string
		for _, s := range steps {
			switch {
			case s.Identity && s.File == "" && s.Ops == nil:
				got = append(got, fmt.Sprintf("%s>%s:=", s.From, s.To))
			case !s.Identity && len(s.Ops) == 1:
				got = append(got, fmt.Sprintf("%s>%s:%s(%s)", s.From, s.To, s.File, s.Ops[0].Path))
			default:
				got = append(got, fmt.Sprintf("%s>%s:bad step %+v", s.From, s.To, s))
			}
		}
		if g := strings.Join(got, " "); g != tt.want {
			t.Errorf("Plan(%s, %s) = %s, want %s", tt.from, tt.to, g, tt.want)
		}
		// Down steps carry the Down ops.
		for _, s := range steps {
			if !s.Identity && (s.From > s.To) != (s.Ops[0].Op == "remove") {
				t.Errorf("Plan(%s, %s): step %s>%s has the %s ops", tt.from, tt.to, s.From, s.To, s.Ops[0].Op)
			}
		}
	}
}

func TestPlanRefusesBadMigrations(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		migs    []Migration
		wantErr string
	}{
		{"duplicate step", []Migration{{From: "1.0", To: "1.1", File: "a.json"}, {From: "1.0", To: "1.1", File: "b.json"}},
			"b.json: the step from 1.0 is also in a.json"},
		{"not one step", []Migration{{From: "1.0", To: "1.2", File: "a.json"}}, "a.json: from 1.0 to 1.2 is not one minor step"},
		{"bad op", []Migration{{From: "1.0", To: "1.1", Down: []Op{{Op: "zap", Path: "/a"}}}},
			`migration 1.0 to 1.1: down[0]: op "zap" is unknown`},
	}
	for _, tt := range tests {
		if _, err := Plan(tt.migs, "1.0.0", "1.1.0"); !errorMatches(err, tt.wantErr) {
			t.Errorf("%s: Plan error = %v, want error containing %q", tt.name, err, tt.wantErr)
		}
	}
}

// TestMigrateAcrossAMajor: a config goes up through a hop file and back down to exactly
// what it was, and the version is set on the way.
func TestMigrateAcrossAMajor(t *testing.T) {
	t.Parallel()
	spec := Spec{File: "/var/lib/app/config.json", VersionKey: "/version", Encoding: Semver}
	migs := []Migration{
		{From: "1.9", To: "2.0", File: "1.9-2.0.json",
			Up:   []Op{{Op: "set", Path: "/master", Value: []byte("{}")}, {Op: "move", From: "/master_ip", Path: "/master/address"}},
			Down: []Op{{Op: "move", From: "/master/address", Path: "/master_ip"}, {Op: "remove", Path: "/master"}}},
		{From: "2.0", To: "2.1", File: "2.0-2.1.json",
			Up:   []Op{{Op: "set", Path: "/workers", Value: []byte("4"), IfAbsent: true}},
			Down: []Op{{Op: "remove", Path: "/workers"}}},
	}
	orig := []byte(`{"master_ip": "10.0.0.1", "version": "1.9.3"}`)
	up, _, err := Migrate(orig, spec, "1.9.3", "2.1.0", migs)
	if err != nil {
		t.Fatalf("Migrate up across the major = %v", err)
	}
	if !strings.Contains(string(up), `"address": "10.0.0.1"`) || !strings.Contains(string(up), `"workers": 4`) || !strings.Contains(string(up), `"version": "2.1.0"`) {
		t.Errorf("up = %s", up)
	}
	down, _, err := Migrate(up, spec, "2.1.0", "1.9.3", migs)
	if err != nil {
		t.Fatalf("Migrate down across the major = %v", err)
	}
	if !sameJSON(t, down, orig) {
		t.Errorf("down(up(x)) = %s, want %s", down, orig)
	}
}

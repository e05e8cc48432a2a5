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
		{"1.2.0", "2.0.0", "", "1.2.0 to 2.0.0 changes the major version"},
		{"2.0.0", "1.9.0", "", "changes the major version"},
		{"1.0", "1.1.0", "", `from: version "1.0": not three numbers`},
		{"1.0.0", "x", "", `to: version "x"`},
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

package config

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// TestUnknownKeySuggestions: an unknown key is refused with its line, its table and the
// known key meant, written with a typo, other separators, its words swapped or cut short.
func TestUnknownKeySuggestions(t *testing.T) {
	base := "app = \"demoapp\"\n[cluster]\nmaster = \"node1\"\n[[cluster.node]]\nname = \"node1\"\n"
	tests := []struct{ name, text, want string }{
		{"typo", base + "[commands]\ndaemon_stop = \"x\"\n", `line 7: unknown key "commands.daemon_stop" in table [commands]; did you mean "daemons_stop"?`},
		{"camel case", base + "[commands]\ndaemonsStop = \"x\"\n", `unknown key "commands.daemonsStop" in table [commands]; did you mean "daemons_stop"?`},
		{"dashes", base + "[commands]\ndaemons-stop = \"x\"\n", `did you mean "daemons_stop"?`},
		{"words swapped", base + "[commands]\nstop_daemons = \"x\"\n", `did you mean "daemons_stop"?`},
		{"prefix", base + "[ssh]\nconnect = \"5s\"\n", `unknown key "ssh.connect" in table [ssh]; did you mean "connect_timeout"?`},
		{"longer", base + "[ssh]\nconnect_timeout_seconds = 5\n", `did you mean "connect_timeout"?`},
		{"two close", base + "[commands]\nqueue_drian = \"x\"\n", `did you mean "queue_drain"?`},
		{"transposed", base + "[ssh]\nuesr = \"x\"\n", `unknown key "ssh.uesr" in table [ssh]; did you mean "user"?`},
		{"node entry", base + "adress = \"x\"\n", `line 6: unknown key "cluster.node.adress" in table [[cluster.node]]; did you mean "address"?`},
		{"top level", "colour = \"red\"\n" + base, `line 1: unknown key "colour" at the top level`},
		{"top-level typo", "ap = \"x\"\n" + base, `unknown key "ap" at the top level; did you mean "app"?`},
		{"table typo", base + "[comands]\ndaemons_stop = \"x\"\n", `line 6: unknown table "comands" at the top level; did you mean "commands"?`},
		{"key of another table", base + "[ssh]\nmaster = \"x\"\n", `unknown key "ssh.master" in table [ssh]; master belongs in [cluster]`},
		{"key of the top level", base + "profile = \"generic\"\n", `unknown key "cluster.node.profile" in table [[cluster.node]]; profile belongs at the top level`},
		{"dotted key", "ssh.usr = \"x\"\n" + base, `line 1: unknown key "ssh.usr" in table [ssh]; did you mean "user"?`},
		{"dotted key below a node", base + "ssh.usr = \"x\"\n", `line 6: unknown table "cluster.node.ssh" in table [[cluster.node]]; ssh belongs at the top level`},
		{"sub-table of a known table", base + "[ssh.options]\nname = \"x\"\n", `line 6: unknown table "ssh.options" in table [ssh]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.text))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Parse() = %v, want an error containing %q", err, tt.want)
			}
		})
	}
	// A table that is unknown is named once, not with each of its keys.
	_, err := Parse([]byte(base + "[comands]\ndaemons_stop = \"x\"\ndaemons_start = \"y\"\n"))
	if err == nil || strings.Count(err.Error(), "unknown") != 1 {
		t.Errorf("Parse(unknown table with two keys) = %v, want one error naming the table", err)
	}
	// A key repeated in every [[cluster.node]] is named once.
	_, err = Parse([]byte(base + "adress = \"a\"\n[[cluster.node]]\nname = \"node2\"\nadress = \"b\"\n"))
	if err == nil || strings.Count(err.Error(), "unknown") != 1 {
		t.Errorf("Parse(typo in two nodes) = %v, want one error", err)
	}
}

// TestEveryKeyIsSuggested: a key of any table written with one letter left out gets that key
// suggested, so that a key added to Config is covered without a new test case.
func TestEveryKeyIsSuggested(t *testing.T) {
	for table, keys := range tables {
		for _, key := range keys {
			typo := key[:len(key)/2] + key[len(key)/2+1:]
			if got := closest(typo, keys); !contains(got, key) {
				t.Errorf("[%s] %s written %s: suggested %q, want %q among them", table, key, typo, got, key)
			}
		}
	}
	if got := closest("colour", tables[""]); len(got) != 0 {
		t.Errorf("closest(colour) = %q, want no suggestion", got)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// TestBadDurations: a duration that is not a string with a unit is refused with its line, its
// key and how to write it.
func TestBadDurations(t *testing.T) {
	base := "app = \"demoapp\"\n[cluster]\nmaster = \"node1\"\n[[cluster.node]]\nname = \"node1\"\n[ssh]\n"
	tests := []struct{ name, value, want string }{
		{"no unit", `"5"`, `line 7: ssh.connect_timeout: invalid duration "5": no unit; write "5s" for 5 seconds, or another unit such as "2m30s"`},
		{"words", `"five seconds"`, `line 7: ssh.connect_timeout: invalid duration "five seconds": write a number and a unit in quotes, such as "5s" or "2m30s"`},
		{"integer", `5`, `line 7: ssh.connect_timeout: invalid duration 5: a number, not a string with a unit; write "5s" for 5 seconds`},
		{"float", `2.5`, `ssh.connect_timeout: invalid duration 2.5: a number, not a string with a unit; write "2.5s" for 2.5 seconds`},
		{"array", `["5s"]`, `ssh.connect_timeout: invalid duration [5s]: write a number and a unit in quotes, such as "5s" or "2m30s"`},
		{"boolean", `true`, `ssh.connect_timeout: invalid duration true: write a number and a unit`},
		{"negative", `"-5s"`, `ssh.connect_timeout: negative duration "-5s": write a number and a unit in quotes`},
		{"negative number", `"-5"`, `ssh.connect_timeout: invalid duration "-5": no unit; write a number and a unit in quotes`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(base + "connect_timeout = " + tt.value + "\n"))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Parse(connect_timeout = %s) = %v, want an error containing %q", tt.value, err, tt.want)
			}
		})
	}
	cfg, err := Parse([]byte(base + "connect_timeout = \"2m30s\"\n[config]\nfile = \"/var/lib/demoapp/config.json\"\n"))
	if err != nil || cfg.SSH.ConnectTimeout.Seconds() != 150 {
		t.Errorf("Parse(connect_timeout = \"2m30s\") = %v, want 150s", err)
	}
}

// TestLoadErrorsGolden keeps the whole message of a config with several mistakes, as an
// operator reads it: the file, then each key with its line, table and suggestion.
//
//	go test ./upgrade/config/ -run TestLoadErrorsGolden -update
func TestLoadErrorsGolden(t *testing.T) {
	for _, name := range []string{"typos", "duration"} {
		t.Run(name, func(t *testing.T) {
			_, err := Load(filepath.Join("testdata", name+".toml"))
			if err == nil {
				t.Fatalf("Load(testdata/%s.toml) succeeded, want an error", name)
			}
			got := err.Error() + "\n"
			golden := filepath.Join("testdata", name+".golden")
			if *update {
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run with -update to write it)", err)
			}
			if got != string(want) {
				t.Errorf("Load(testdata/%s.toml) error =\n%s\nwant (%s)\n%s", name, got, golden, want)
			}
		})
	}
}

package main

import (
	"encoding/json"
	"maps"
	"strings"
	"testing"
)

// TestUpgradeAcrossAMajor runs a whole upgrade over a major version: refused while the
// target's upgrade policy does not admit the hop, refused while its tree ships no migration
// file for the hop, done once it does (the config migrated by the hop's steps), and undone
// by the downgrade the older tree's policy admits. A refused run changes nothing.
func TestUpgradeAcrossAMajor(t *testing.T) {
	t.Parallel()
	lc := newLocalCluster(t, "1.9.0", "1.9.0", "2.0.0")
	orig := lc.read("var/lib/app/config.json")

	refused := func(step, want string) {
		t.Helper()
		before := lc.snapshot()
		code, out, errOut := lc.cutover("upgrade", "--to=2.0.0", "--yes")
		if code != 1 || !strings.Contains(out+errOut, want) {
			t.Errorf("%s: exit %d, want 1 with %q\nstdout:\n%s\nstderr:\n%s", step, code, want, out, errOut)
		}
		if after := lc.snapshot(); after != before {
			t.Errorf("%s: a refused run changed the cluster:\n%s\nwant\n%s", step, after, before)
		}
	}
	refused("no policy", "changes the major version")

	lc.write("usr/share/app/2.0.0/cutover/upgrade-policy.json", `{"allowed_from": ">= 1.9, < 2.0"}`)
	refused("no hop file", "no migration file hops from the last minor of 1 to 2.0")

	lc.write("usr/share/app/2.0.0/cutover/migrations/1.9-2.0.json",
		`{"from":"1.9","to":"2.0","up":[{"op":"move","from":"/title","path":"/label"}],"down":[{"op":"move","from":"/label","path":"/title"}]}`)
	if code, out, errOut := lc.cutover("upgrade", "--to=2.0.0", "--yes"); code != 0 {
		t.Fatalf("upgrade across the major: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	if lib, share := lc.readlink("etc/app/lib"), lc.readlink("etc/app/share"); !strings.HasSuffix(lib, "/2.0.0") || !strings.HasSuffix(share, "/2.0.0") {
		t.Errorf("links after the upgrade: %s, %s; want 2.0.0", lib, share)
	}
	var got map[string]string
	if err := json.Unmarshal([]byte(lc.read("var/lib/app/config.json")), &got); err != nil {
		t.Fatal(err)
	}
	if want := map[string]string{"label": "demo", "version": "2.0.0"}; !maps.Equal(got, want) {
		t.Errorf("config after the upgrade: %v, want %v", got, want)
	}

	// Back: 1.9.0's own policy must admit 2.0 as a source; the live 2.0.0 tree's hop file
	// has the steps down.
	lc.write("usr/share/app/1.9.0/cutover/upgrade-policy.json", `{"allowed_from": ">= 2.0, < 2.1"}`)
	if code, out, errOut := lc.cutover("upgrade", "--to=1.9.0", "--yes"); code != 0 {
		t.Fatalf("downgrade across the major: exit %d\nstdout:\n%s\nstderr:\n%s", code, out, errOut)
	}
	if lib := lc.readlink("etc/app/lib"); !strings.HasSuffix(lib, "/1.9.0") {
		t.Errorf("lib after the downgrade: %s, want 1.9.0", lib)
	}
	if back := lc.read("var/lib/app/config.json"); !sameJSONText(back, orig) {
		t.Errorf("config after the downgrade:\n%s\nwant\n%s", back, orig)
	}
}

// sameJSONText reports whether two JSON texts hold the same value.
func sameJSONText(a, b string) bool {
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return string(xa) == string(ya)
}

package main

import (
	"strings"
	"testing"
)

// TestDowngradeGoesBack: `upgrade --downgrade` goes back to the version the cluster ran before
// its last done upgrade; it is refused, changing nothing, with no done upgrade in the journal
// and after a downgrade.
func TestDowngradeGoesBack(t *testing.T) {
	lc := newLocalCluster(t, "1.0.0", "1.0.0", "1.1.0")
	before := lc.snapshot()
	if code, _, errOut := lc.cutover("upgrade", "--downgrade", "--yes"); code != exitUsage || !strings.Contains(errOut, "no done upgrade") {
		t.Errorf("--downgrade with an empty journal: exit %d, want %d\n%s", code, exitUsage, errOut)
	}
	if after := lc.snapshot(); after != before {
		t.Errorf("a refused --downgrade changed the cluster:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	if code, out, errOut := lc.cutover("upgrade", "--to=1.1.0", "--yes"); code != exitOK {
		t.Fatalf("upgrade: exit %d\n%s%s", code, out, errOut)
	}
	if got := lc.readlink("etc/app/lib"); !strings.HasSuffix(got, "/1.1.0") {
		t.Fatalf("after the upgrade the lib link points at %s", got)
	}
	if code, out, errOut := lc.cutover("upgrade", "--downgrade", "--yes"); code != exitOK || !strings.Contains(out, "1.1.0 -> 1.0.0") {
		t.Fatalf("--downgrade: exit %d, want 0 and 1.1.0 -> 1.0.0\n%s%s", code, out, errOut)
	}
	if got := lc.readlink("etc/app/lib"); !strings.HasSuffix(got, "/1.0.0") {
		t.Errorf("after --downgrade the lib link points at %s, want 1.0.0", got)
	}
	if code, _, errOut := lc.cutover("upgrade", "--downgrade", "--yes"); code != exitUsage || !strings.Contains(errOut, "not an upgrade") {
		t.Errorf("--downgrade after a downgrade: exit %d, want %d\n%s", code, exitUsage, errOut)
	}
}

// TestDowngradeAfterAJump: after an upgrade that skipped a minor version (1.0.0 -> 1.2.0,
// allow_minor_jump), `upgrade --downgrade` goes back to the newest installed version of the
// previous minor, 1.1.0, the way back that prune keeps, as downgrade = "previous-minor"
// allows; without one installed it names 1.0.0, which the policy refuses, changing nothing.
func TestDowngradeAfterAJump(t *testing.T) {
	for _, tc := range []struct {
		name     string
		versions []string
		code     int
		want     string
		link     string
	}{
		{"previous minor installed", []string{"1.0.0", "1.1.0", "1.2.0"}, exitOK, "1.2.0 -> 1.1.0", "/1.1.0"},
		{"previous minor missing", []string{"1.0.0", "1.2.0"}, exitFailed, "a downgrade can only go to the previous minor version", "/1.2.0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lc := newLocalCluster(t, "1.0.0", tc.versions...)
			if code, out, errOut := lc.cutover("upgrade", "--to=1.2.0", "--yes"); code != exitOK {
				t.Fatalf("upgrade: exit %d\n%s%s", code, out, errOut)
			}
			code, out, errOut := lc.cutover("upgrade", "--downgrade", "--yes")
			if code != tc.code || !strings.Contains(out+errOut, tc.want) {
				t.Errorf("--downgrade: exit %d, want %d and %q\n%s%s", code, tc.code, tc.want, out, errOut)
			}
			if got := lc.readlink("etc/app/lib"); !strings.HasSuffix(got, tc.link) {
				t.Errorf("after --downgrade the lib link points at %s, want %s", got, tc.link)
			}
		})
	}
}

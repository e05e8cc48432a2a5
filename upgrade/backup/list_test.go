package backup

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestCheckID(t *testing.T) {
	t.Parallel()
	tests := []struct {
		id string
		ok bool
	}{
		{"app-1.0.0-to-1.1.0-20260102T030405Z", true},
		{"app-1.1-to-1.2-20260102T030405Z", true},
		{"app-1.1.0-rc.1-to-1.1.0-20260102T030405Z", true},
		{"app-1.1.0-before-restore-20260102T030405Z", true},
		{"ganeti-2.16.2-to-3.0.2-20260102T030405Z", true},
		{"", false},
		{"app", false},
		{"app-1.0.0-to-1.1.0", false},
		{"app-1.0.0-to-1.1.0-20260102T030405Z.tar.gz", false},
		{"app-1.0.0-to-1.1.0-20260102T030405", false},
		{"../app-1.0.0-to-1.1.0-20260102T030405Z", false},
		{"app-1.0.0-to-../1.1.0-20260102T030405Z", false},
		{"app-1.0.0-to-1..1-20260102T030405Z", false},
		{"app-1.0.0-to-1.1.0-20260102T030405Z;rm", false},
		{"app-1.0.0 -to-1.1.0-20260102T030405Z", false},
		{"App-1.0.0-to-1.1.0-20260102T030405Z", false},
	}
	for _, tt := range tests {
		if err := CheckID(tt.id); (err == nil) != tt.ok {
			t.Errorf("CheckID(%q) = %v, want ok %v", tt.id, err, tt.ok)
		}
	}
}

// TestPrune keeps the newest archives, and the newest of the live version even when older;
// archives kept before a restore are never counted nor removed.
func TestPrune(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	names := []string{
		"app-1.0.0-to-1.1.0-20260101T000000Z", // the newest of the live version 1.0.0
		"app-1.1.0-to-1.2.0-20260102T000000Z",
		"app-1.2.0-to-1.3.0-20260103T000000Z",
		"app-1.3.0-to-1.4.0-20260104T000000Z",
		"app-0.9.0-to-1.0.0-20250101T000000Z",
		"app-1.2.0-before-restore-20250102T000000Z",
		"other-1.0.0-to-1.1.0-20200101T000000Z",
	}
	for _, n := range names {
		if err := os.WriteFile(filepath.Join(dir, n+".tar.gz"), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	removed, err := Prune(dir, "app", 2, "1.0.0", nil)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range removed {
		got = append(got, strings.TrimSuffix(filepath.Base(p), ".tar.gz"))
	}
	want := "app-1.1.0-to-1.2.0-20260102T000000Z app-0.9.0-to-1.0.0-20250101T000000Z"
	if strings.Join(got, " ") != want {
		t.Errorf("Prune removed %v, want %s", got, want)
	}
	left, _ := IDs(dir, "app")
	if len(left) != 4 {
		t.Errorf("left %v, want the two newest, the live version's and the kept state", left)
	}
}

// TestPruneFollowsRunOrder: after the clock jumped backwards the newest run's archive has the
// oldest time in its name; retention follows the journal's run order and keeps it.
func TestPruneFollowsRunOrder(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	runs := map[string]uint64{
		"app-1.0.0-to-1.1.0-20260301T000000Z": 4,
		"app-1.1.0-to-1.2.0-20260302T000000Z": 5,
		"app-1.2.0-to-1.3.0-20250101T000000Z": 6, // the newest run, taken after the clock went back
	}
	names := []string{"app-0.9.0-to-1.0.0-20260201T000000Z"} // no journaled run: the oldest
	for n := range runs {
		names = append(names, n)
	}
	for _, n := range names {
		if err := os.WriteFile(filepath.Join(dir, n+".tar.gz"), nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	removed, err := Prune(dir, "app", 2, "1.3.0", runs)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range removed {
		got = append(got, strings.TrimSuffix(filepath.Base(p), ".tar.gz"))
	}
	slices.Sort(got)
	want := []string{"app-0.9.0-to-1.0.0-20260201T000000Z", "app-1.0.0-to-1.1.0-20260301T000000Z"}
	if !slices.Equal(got, want) {
		t.Errorf("Prune removed %v, want %v: the two newest runs' archives stay", got, want)
	}
}

// TestListOldFormat lists an archive of an older cutover with its problem: no owners in its
// manifest, so it is neither verified nor restored.
func TestListOldFormat(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	data, err := os.ReadFile(filepath.Join("testdata", "hostile", "manifest-format-1.tar.gz"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(f.dir(), 0o700); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(f.dir(), "app-1.0.0-to-1.1.0-20260102T030405Z.tar.gz")
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	good, _ := f.backup()
	list, err := List(context.Background(), f.dir(), "app", f.sc, true)
	if err != nil || len(list) != 2 {
		t.Fatalf("List = %+v, %v", list, err)
	}
	if old := list[0]; old.ManifestOK || old.Verified || !strings.Contains(old.Problem, "manifest format 1") {
		t.Errorf("old archive listed as %+v, want its problem", old)
	}
	if b := list[1]; b.Path != good || !b.ManifestOK || !b.Verified || b.Files != 3 || b.Created.Before(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("archive listed as %+v, want it verified", b)
	}
}

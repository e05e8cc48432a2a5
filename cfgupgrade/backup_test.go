package cfgupgrade

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestApplyKeepsThreeBackups: a dozen migrations leave the config and its three newest
// backups, not a dozen. Other files are left alone even when their names look like
// backups: a link (and the file it names), a directory, another file's backup, a name that
// is not exactly a backup's.
func TestApplyKeepsThreeBackups(t *testing.T) {
	t.Parallel()
	spec := installConfig(t, demoFixture, 0o640)
	_, migs := demoFixture.load(t)
	dir := filepath.Dir(spec.File)
	outside := filepath.Join(t.TempDir(), "precious")
	writeFile(t, outside, "not a backup")
	if err := os.Symlink(outside, filepath.Join(dir, "config.json.1.0.0-20200101T000000Z.bak")); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "config.json.1.0.0-20200101T000001Z.bak"), 0o700); err != nil {
		t.Fatal(err)
	}
	others := []string{
		"other.json.1.0.0-20200101T000000Z.bak",
		"config.json.notes.bak",
		"config.json.1.0.0-20200101T000000Z.bak.orig",
		"config.json.1.0.0-2020-01-01.bak",
		"config.json.1.0.0-20200101T000000Z-1.bak",
		"config.json.1.0-20200101T000000Z.bak",
	}
	for _, name := range others {
		writeFile(t, filepath.Join(dir, name), "{}")
	}

	var backups []string
	versions := []string{"1.0.0", "1.1.0"}
	for i := range 12 {
		from, to := versions[i%2], versions[(i+1)%2]
		_, backup, err := Apply(spec, from, to, migs, Options{Now: now.Add(time.Duration(i) * time.Hour)})
		if err != nil {
			t.Fatalf("Apply %d (%s to %s): %v", i, from, to, err)
		}
		backups = append(backups, filepath.Base(backup))
	}
	want := append([]string{"config.json", "config.json.1.0.0-20200101T000000Z.bak", "config.json.1.0.0-20200101T000001Z.bak"}, others...)
	want = append(want, backups[len(backups)-3:]...)
	checkDir(t, dir, want...)
	if data, err := os.ReadFile(outside); err != nil || string(data) != "not a backup" {
		t.Errorf("the file a link named like a backup points to: %q, %v; want it untouched", data, err)
	}
}

// TestBackupIsNoWiderThanTheConfig: a backup is readable by its owner only, and not even
// written to by it when the config is not.
func TestBackupIsNoWiderThanTheConfig(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ config, backup os.FileMode }{
		{0o644, 0o600}, {0o640, 0o600}, {0o600, 0o600}, {0o400, 0o400}, {0o444, 0o400},
	} {
		t.Run(fmt.Sprintf("%04o", tt.config), func(t *testing.T) {
			t.Parallel()
			spec := installConfig(t, demoFixture, tt.config)
			_, migs := demoFixture.load(t)
			_, backup, err := Apply(spec, "1.0.0", "1.1.0", migs, Options{Now: now})
			if err != nil {
				t.Fatal(err)
			}
			info, err := os.Lstat(backup)
			if err != nil {
				t.Fatal(err)
			}
			if info.Mode() != tt.backup {
				t.Errorf("config mode %04o: backup mode = %v, want %v", tt.config, info.Mode(), tt.backup)
			}
		})
	}
}

func TestParseBackupName(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 11, 21, 17, 1, 2, 0, time.UTC)
	tests := []struct {
		name string
		seq  int
		ok   bool
	}{
		{"config.json.1.0.0-20261121T170102Z.bak", 1, true},
		{"config.json.1.0.0-rc.1-20261121T170102Z.bak", 1, true},
		{"config.json.1.1.0-rc1-20261121T170102Z-7.bak", 7, true},
		{"config.json.1.0.0-20261121T170102Z-1.bak", 0, false},
		{"config.json.1.0.0-20261121T170102Z-07.bak", 0, false},
		{"config.json.1.0.0-20261121T170102Z-101.bak", 0, false},
		{"config.json.1.0.0-20261121T170102Z", 0, false},
		{"config.json.-20261121T170102Z.bak", 0, false},
		{"config.json.banana-20261121T170102Z.bak", 0, false},
		{"config.json.1.0.0-20261321T170102Z.bak", 0, false},
		{"config.jsonx.1.0.0-20261121T170102Z.bak", 0, false},
		{"other.json.1.0.0-20261121T170102Z.bak", 0, false},
	}
	for _, tt := range tests {
		gotAt, seq, ok := parseBackupName("config.json", tt.name)
		if ok != tt.ok || seq != tt.seq || (ok && !gotAt.Equal(at)) {
			t.Errorf("parseBackupName(%q) = %v, %d, %v; want %v, %d, %v", tt.name, gotAt, seq, ok, at, tt.seq, tt.ok)
		}
	}
}

// TestDocsSayHowManyBackupsAreKept: the documents give the number of config copies Apply
// keeps as it is.
func TestDocsSayHowManyBackupsAreKept(t *testing.T) {
	for file, want := range map[string]string{
		"../docs/configuration.md": fmt.Sprintf("removes the copies beyond the %d newest, so at most %d are kept", backupsKept, backupsKept),
		"../docs/migrations.md":    fmt.Sprintf("the %d newest copies are kept", backupsKept),
	} {
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(strings.Join(strings.Fields(string(data)), " "), want) {
			t.Errorf("%s does not say %q", file, want)
		}
	}
}

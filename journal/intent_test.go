package journal

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func sampleIntent() Intent {
	return Intent{RunID: 7, From: "1.0.0", To: "1.1.0", Direction: "upgrade", Host: "node1", PID: 4242, Created: t0}
}

func TestIntentRoundTrip(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "state")
	path := filepath.Join(dir, "intent.json")
	in := sampleIntent()
	if err := WriteIntent(path, in); err != nil {
		t.Fatal(err)
	}
	got, err := ReadIntent(path)
	if err != nil {
		t.Fatal(err)
	}
	if got != in {
		t.Errorf("ReadIntent = %+v, want %+v", got, in)
	}
	if m := fileMode(t, path); m != 0o600 {
		t.Errorf("intent mode = %v, want 0600", m)
	}
	if m := fileMode(t, dir); m != 0o700 {
		t.Errorf("intent directory mode = %v, want 0700", m)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "intent.golden", data)

	// Overwriting replaces the whole file and leaves no temporary file.
	in.RunID, in.To = 8, "1.2.0"
	if err := WriteIntent(path, in); err != nil {
		t.Fatal(err)
	}
	if got, err := ReadIntent(path); err != nil || got != in {
		t.Errorf("ReadIntent after overwrite = %+v, %v, want %+v", got, err, in)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("intent directory holds %d entries, want 1", len(entries))
	}

	if err := RemoveIntent(path); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadIntent(path); !NoIntent(err) || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("ReadIntent after RemoveIntent: err = %v, want no intent", err)
	}
	if err := RemoveIntent(path); err != nil {
		t.Errorf("RemoveIntent of a missing intent: %v", err)
	}
}

func TestIntentCreatedDefaultsToNow(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "intent.json")
	in := sampleIntent()
	in.Created = time.Time{}
	before := time.Now().Add(-time.Second)
	if err := WriteIntent(path, in); err != nil {
		t.Fatal(err)
	}
	got, err := ReadIntent(path)
	if err != nil {
		t.Fatal(err)
	}
	if got.Created.Before(before) || got.Created.After(time.Now()) {
		t.Errorf("Created = %v, want now", got.Created)
	}
}

func TestIntentAbsent(t *testing.T) {
	t.Parallel()
	for _, path := range []string{
		filepath.Join(t.TempDir(), "intent.json"),
		filepath.Join(t.TempDir(), "no-such-dir", "intent.json"),
	} {
		_, err := ReadIntent(path)
		if !NoIntent(err) || !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("ReadIntent(%s) err = %v, want no intent", path, err)
		}
	}
}

func TestIntentMalformed(t *testing.T) {
	t.Parallel()
	tests := map[string]string{
		"empty":          "",
		"not json":       "run 7 pending\n",
		"truncated":      `{"run_id": 7, "to": "1.1.0"`,
		"unknown field":  `{"run_id": 7, "to": "1.1.0", "force": true}`,
		"trailing data":  `{"run_id": 7, "to": "1.1.0"} {"run_id": 8, "to": "1.2.0"}`,
		"trailing junk":  `{"run_id": 7, "to": "1.1.0"}}`,
		"no run id":      `{"to": "1.1.0"}`,
		"zero run id":    `{"run_id": 0, "to": "1.1.0"}`,
		"no target":      `{"run_id": 7, "from": "1.0.0"}`,
		"null":           `null`,
		"array":          `[7, "1.1.0"]`,
		"wrong type":     `{"run_id": "7", "to": "1.1.0"}`,
		"negative id":    `{"run_id": -7, "to": "1.1.0"}`,
		"bad time":       `{"run_id": 7, "to": "1.1.0", "created": "yesterday"}`,
		"oversized file": `{"run_id": 7, "to": "1.1.0", "from": "` + strings.Repeat("x", maxIntentSize) + `"}`,
	}
	for name, content := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "intent.json")
			writeFile(t, path, []byte(content))
			_, err := ReadIntent(path)
			if err == nil || NoIntent(err) {
				t.Fatalf("ReadIntent(%q) err = %v, want a malformed intent error", content, err)
			}
			if !strings.Contains(err.Error(), path) {
				t.Errorf("error %q does not name %s", err, path)
			}
		})
	}
	t.Run("a directory", func(t *testing.T) {
		t.Parallel()
		path := filepath.Join(t.TempDir(), "intent.json")
		if err := os.Mkdir(path, 0o700); err != nil {
			t.Fatal(err)
		}
		if _, err := ReadIntent(path); err == nil || NoIntent(err) || !strings.Contains(err.Error(), path) {
			t.Errorf("ReadIntent of a directory: err = %v, want an error naming it", err)
		}
	})
}

func TestWriteIntentRefusesIncomplete(t *testing.T) {
	t.Parallel()
	for name, change := range map[string]func(*Intent){
		"no run id": func(in *Intent) { in.RunID = 0 },
		"no target": func(in *Intent) { in.To = "" },
	} {
		path := filepath.Join(t.TempDir(), "intent.json")
		in := sampleIntent()
		change(&in)
		if err := WriteIntent(path, in); err == nil || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: WriteIntent err = %v, want an error naming %s", name, err, path)
		}
		if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s: a refused intent was written (stat: %v)", name, err)
		}
	}
}

// TestReadIntentRefusesNonFiles: a FIFO, a device or a link where the intent should be is
// refused at once, never read until it ends.
func TestReadIntentRefusesNonFiles(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink("/dev/zero", link); err != nil {
		t.Fatal(err)
	}
	ww := filepath.Join(dir, "ww")
	if err := WriteIntent(ww, Intent{RunID: 1, To: "1.1.0"}); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(ww, 0o666); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{fifo, link, "/dev/zero", ww} {
		done := make(chan error, 1)
		go func() { _, err := ReadIntent(p); done <- err }()
		select {
		case err := <-done:
			if err == nil || NoIntent(err) || !strings.Contains(err.Error(), p) {
				t.Errorf("ReadIntent(%s) = %v, want an error naming it", p, err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("ReadIntent(%s) still reads after 5 s", p)
		}
	}
}

// TestWriteIntentRemovesDeadWritersTemps: a write of the intent killed between creating its
// temporary file and renaming it leaves the file in the state directory; the next write
// removes it, since its writer is dead, and leaves alone the file of a writer that still runs.
func TestWriteIntentRemovesDeadWritersTemps(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "intent.json")
	// Linux gives no process an id of 2^22 (PID_MAX_LIMIT) or more: a dead writer whose id
	// no process can have since taken.
	dead := 1 << 22
	live := exec.Command("sleep", "30")
	if err := live.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { live.Process.Kill(); live.Wait() })
	deadTemp := filepath.Join(dir, fmt.Sprintf(".intent.json.new-%d-123456", dead))
	liveTemp := filepath.Join(dir, fmt.Sprintf(".intent.json.new-%d-654321", live.Process.Pid))
	for _, f := range []string{deadTemp, liveTemp} {
		if err := os.WriteFile(f, []byte(`{"run_id": 1`), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := WriteIntent(path, sampleIntent()); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(deadTemp); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the dead writer's %s is still there (%v)", deadTemp, err)
	}
	if _, err := os.Stat(liveTemp); err != nil {
		t.Errorf("the live writer's temporary file: %v, want it left alone", err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 2 {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("the state directory holds %v, want the intent and the live writer's file", names)
	}
}

package journal

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// maxIntentSize bounds what ReadIntent reads: an intent is a few hundred bytes.
const maxIntentSize = 64 << 10

// Intent is the intent record of a pending run: while the intent file exists,
// a run must be resumed or aborted.
type Intent struct {
	RunID uint64 `json:"run_id"`
	// Kind is the kind of the pending run, as its journal record names it; "" is an
	// upgrade run (intents written before kinds were recorded).
	Kind      string    `json:"kind,omitempty"`
	From      string    `json:"from"`
	To        string    `json:"to"`
	Direction string    `json:"direction"`
	Host      string    `json:"host"`
	PID       int       `json:"pid"`
	Created   time.Time `json:"created"`
	// App, Config and StateDir name the application, the cutover.toml and the state
	// directory of the run, so that a resume with another configuration is refused.
	App      string `json:"app,omitempty"`
	Config   string `json:"config,omitempty"`
	StateDir string `json:"state_dir,omitempty"`
}

// WriteIntent writes in as JSON to path, atomically: a temporary file in the
// same directory is written and fsynced, renamed over path, and the directory
// is fsynced. The file has mode 0600; a missing directory is created with mode
// 0700, durably (see [MkdirAllDurable]). in must name its run (RunID) and target version (To); a zero Created
// is set to now.
func WriteIntent(path string, in Intent) error {
	if in.RunID == 0 || in.To == "" {
		return fmt.Errorf("write intent %s: the intent needs a run id and a target version", path)
	}
	if in.Created.IsZero() {
		in.Created = time.Now()
	}
	in.Created = in.Created.UTC()
	data, err := json.MarshalIndent(in, "", "  ")
	if err != nil {
		return fmt.Errorf("write intent %s: %w", path, err)
	}
	if err := writeAtomic(path, append(data, '\n')); err != nil {
		return fmt.Errorf("write intent %s: %w", path, err)
	}
	return nil
}

// ReadIntent reads the intent file at path. When there is none, the error
// satisfies errors.Is(err, fs.ErrNotExist) and [NoIntent]. A file that is
// not a valid intent (bad JSON, unknown fields, trailing data, no run id or
// target version) is an error naming the file, never taken for "no intent".
func ReadIntent(path string) (Intent, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOFOLLOW, 0)
	if errors.Is(err, syscall.ELOOP) {
		return Intent{}, fmt.Errorf("read intent %s: malformed: a symlink, which cutover never writes", path)
	}
	if err != nil {
		return Intent{}, fmt.Errorf("read intent: %w", err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return Intent{}, fmt.Errorf("read intent: %w", err)
	}
	if !info.Mode().IsRegular() {
		return Intent{}, fmt.Errorf("read intent %s: malformed: not a regular file (%s)", path, info.Mode().Type())
	}
	if st, ok := info.Sys().(*syscall.Stat_t); ok && (st.Uid != 0 && int(st.Uid) != os.Geteuid() || info.Mode().Perm()&0o022 != 0) {
		return Intent{}, fmt.Errorf("read intent %s: refused: owned by uid %d with mode %04o, so another user could have written it", path, st.Uid, info.Mode().Perm())
	}
	data, err := io.ReadAll(io.LimitReader(f, maxIntentSize+1))
	if err != nil {
		return Intent{}, fmt.Errorf("read intent %s: %w", path, err)
	}
	if len(data) > maxIntentSize {
		return Intent{}, fmt.Errorf("read intent %s: malformed: larger than %d bytes", path, maxIntentSize)
	}
	var in Intent
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&in); err != nil {
		return Intent{}, fmt.Errorf("read intent %s: malformed: %w", path, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return Intent{}, fmt.Errorf("read intent %s: malformed: data after the JSON object", path)
	}
	if in.RunID == 0 || in.To == "" {
		return Intent{}, fmt.Errorf("read intent %s: malformed: no run_id or to", path)
	}
	return in, nil
}

// RemoveIntent removes the intent file at path and fsyncs its directory, so
// the run is no longer pending even after a crash. A missing file is not an
// error.
func RemoveIntent(path string) error {
	if err := os.Remove(path); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("remove intent: %w", err)
	}
	if err := syncDir(filepath.Dir(path)); err != nil {
		return fmt.Errorf("remove intent %s: %w", path, err)
	}
	return nil
}

// writeAtomic replaces path with data (mode 0600): temporary file, fsync,
// rename, fsync of the directory. The temporary file's name carries the
// writer's process id, and the temporary files of writers that no longer run
// (killed between creating theirs and the rename) are removed first.
func writeAtomic(path string, data []byte) (err error) {
	dir, base := filepath.Dir(path), filepath.Base(path)
	if err := MkdirAllDurable(dir, 0o700); err != nil {
		return err
	}
	removeDeadTemps(dir, base)
	tmp, err := os.CreateTemp(dir, fmt.Sprintf(".%s.new-%d-*", base, os.Getpid()))
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	if err := tmp.Chmod(0o600); err != nil {
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		return err
	}
	if err := tmp.Sync(); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return err
	}
	return syncDir(dir)
}

// removeDeadTemps removes the temporary files that writeAtomic left beside
// base in dir when its process was killed mid-write: a writer that no longer
// runs will never rename its file. A live writer's file is left alone, and
// failures are ignored: a leftover only takes room.
func removeDeadTemps(dir, base string) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	prefix := "." + base + ".new-"
	for _, e := range entries {
		rest, ok := strings.CutPrefix(e.Name(), prefix)
		if !ok || !e.Type().IsRegular() {
			continue
		}
		id, _, ok := strings.Cut(rest, "-")
		pid, err := strconv.Atoi(id)
		if !ok || err != nil || pid <= 0 || pid == os.Getpid() {
			continue
		}
		if syscall.Kill(pid, 0) == syscall.ESRCH {
			os.Remove(filepath.Join(dir, e.Name()))
		}
	}
}

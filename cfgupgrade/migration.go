package cfgupgrade

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// Migration is one minor step of a config, as a migration file holds it:
// {"from": "1.1", "to": "1.2", "up": [ops], "down": [ops]}.
type Migration struct {
	// From and To are MAJOR.MINOR; To is From's next minor.
	From, To string
	// Up turns a From config into a To config; Down turns it back.
	Up, Down []Op
	// File is where the migration was loaded from, for error messages.
	File string
}

// migrationFile is the strict shape of a migration file; pointers tell an
// absent key from an empty one.
type migrationFile struct {
	From *string            `json:"from"`
	To   *string            `json:"to"`
	Up   *[]json.RawMessage `json:"up"`
	Down *[]json.RawMessage `json:"down"`
}

// LoadMigrations loads every *.json file in dir, in name order. A missing dir
// holds no migrations and is not an error. Files are decoded strictly
// (unknown fields are errors; from, to, up and down are required) and
// validated: from and to are MAJOR.MINOR of the same major with to one minor
// after from, or a hop from a minor of one major to the next major's N.0;
// every op is well-formed, and no two files describe the same step. The error names every bad file and op, as in
// "migrations/1.1-1.2.json: up[2]: op \"frobnicate\" is unknown".
func LoadMigrations(dir string) ([]Migration, error) {
	return LoadMigrationsWith(dir, readBounded)
}

// LoadMigrationsWith is LoadMigrations reading each file with read, such as a reader that
// refuses files other users could have edited.
func LoadMigrationsWith(dir string, read func(name string) ([]byte, error)) ([]Migration, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read migrations: %w", err)
	}
	var migs []Migration
	var errs []error
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), ".json") || e.IsDir() {
			continue
		}
		m, err := loadMigration(filepath.Join(dir, e.Name()), read)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		migs = append(migs, m)
	}
	if len(errs) == 0 {
		errs = append(errs, checkMigrations(migs))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return migs, nil
}

// maxMigrationSize bounds a migration file.
const maxMigrationSize = 1 << 20

// readBounded reads a regular file of at most maxMigrationSize bytes; a FIFO or a device is
// refused without blocking.
func readBounded(name string) ([]byte, error) {
	f, err := os.OpenFile(name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if info, err := f.Stat(); err != nil {
		return nil, err
	} else if !info.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", name)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxMigrationSize+1))
	if err == nil && len(data) > maxMigrationSize {
		err = fmt.Errorf("%s is larger than %d bytes", name, maxMigrationSize)
	}
	return data, err
}

func loadMigration(file string, read func(string) ([]byte, error)) (Migration, error) {
	data, err := read(file)
	if err != nil {
		return Migration{}, fmt.Errorf("read migration: %w", err)
	}
	var f migrationFile
	if err := decodeStrict(data, &f); err != nil {
		return Migration{}, fmt.Errorf("%s: %w", file, err)
	}
	var errs []error
	for _, key := range []struct {
		name    string
		missing bool
	}{{"from", f.From == nil}, {"to", f.To == nil}, {"up", f.Up == nil}, {"down", f.Down == nil}} {
		if key.missing {
			errs = append(errs, fmt.Errorf("%s: %q is missing", file, key.name))
		}
	}
	if len(errs) > 0 {
		return Migration{}, errors.Join(errs...)
	}
	m := Migration{From: *f.From, To: *f.To, File: file}
	m.Up, errs = decodeOps(file, "up", *f.Up, errs)
	m.Down, errs = decodeOps(file, "down", *f.Down, errs)
	if len(errs) == 0 {
		errs = append(errs, m.check())
	}
	return m, errors.Join(errs...)
}

// decodeOps decodes and checks each op of the list called name, adding an
// error per bad op to errs.
func decodeOps(file, name string, raws []json.RawMessage, errs []error) ([]Op, []error) {
	ops := make([]Op, 0, len(raws))
	for i, raw := range raws {
		var op Op
		err := decodeStrict(raw, &op)
		if err == nil {
			err = op.check()
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %s[%d]: %w", file, name, i, err))
			continue
		}
		ops = append(ops, op)
	}
	return ops, errs
}

// decodeStrict decodes exactly one JSON value into v, rejecting unknown fields and a value
// that nests deeper than MaxJSONDepth.
func decodeStrict(data []byte, v any) error {
	if err := CheckJSONDepth(data, MaxJSONDepth); err != nil {
		return fmt.Errorf("invalid JSON: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("invalid JSON: %s", strings.TrimPrefix(err.Error(), "json: "))
	}
	if dec.More() {
		return errors.New("invalid JSON: data after the JSON value")
	}
	return nil
}

// check validates m on its own: its steps and every op.
func (m Migration) check() error {
	name := m.name()
	fromMajor, fromMinor, err := parseSeries(m.From)
	if err != nil {
		return fmt.Errorf("%s: from: %w", name, err)
	}
	toMajor, toMinor, err := parseSeries(m.To)
	if err != nil {
		return fmt.Errorf("%s: to: %w", name, err)
	}
	hop := toMajor == fromMajor+1 && toMinor == 0
	if !hop && (toMajor != fromMajor || toMinor != fromMinor+1) {
		return fmt.Errorf("%s: from %s to %s is not one minor step (want to %s, or to %d.0 for a hop to the next major)", name, m.From, m.To, minorName(fromMajor, fromMinor+1), fromMajor+1)
	}
	var errs []error
	for _, list := range []struct {
		name string
		ops  []Op
	}{{"up", m.Up}, {"down", m.Down}} {
		for i, op := range list.ops {
			if err := op.check(); err != nil {
				errs = append(errs, fmt.Errorf("%s: %s[%d]: %w", name, list.name, i, err))
			}
		}
	}
	return errors.Join(errs...)
}

// hop reports whether m takes a config from the last minor of one major to the next
// major's first minor, N.0.
func (m Migration) hop() bool {
	fromMajor, _, err1 := parseSeries(m.From)
	toMajor, toMinor, err2 := parseSeries(m.To)
	return err1 == nil && err2 == nil && toMajor == fromMajor+1 && toMinor == 0
}

// name names m in error messages: its file, or its step.
func (m Migration) name() string {
	if m.File != "" {
		return m.File
	}
	return fmt.Sprintf("migration %s to %s", m.From, m.To)
}

// checkMigrations validates every migration and that no two describe the
// same step.
func checkMigrations(migs []Migration) error {
	var errs []error
	seen := make(map[string]string)
	for _, m := range migs {
		if err := m.check(); err != nil {
			errs = append(errs, err)
			continue
		}
		major, minor, _ := parseSeries(m.From)
		step := minorName(major, minor)
		if other, ok := seen[step]; ok {
			errs = append(errs, fmt.Errorf("%s: the step from %s is also in %s", m.name(), step, other))
			continue
		}
		seen[step] = m.name()
	}
	return errors.Join(errs...)
}

package cfgupgrade

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// Spec says where a config file keeps its version.
type Spec struct {
	// File is the absolute path of the JSON config on the local machine.
	File string
	// VersionKey is the JSON Pointer (RFC 6901) to the version, e.g. "/version".
	VersionKey string
	// Encoding is how the version is stored.
	Encoding Encoding
}

// name names the config in error messages.
func (s Spec) name() string {
	if s.File == "" {
		return "config"
	}
	return s.File
}

// versionPath checks s and returns its version key's segments.
func (s Spec) versionPath() ([]string, error) {
	if err := s.Encoding.check(); err != nil {
		return nil, fmt.Errorf("%s: %w", s.name(), err)
	}
	segs, err := parsePointer(s.VersionKey)
	switch {
	case err != nil:
		return nil, fmt.Errorf("%s: version key: %w", s.name(), err)
	case len(segs) == 0:
		return nil, fmt.Errorf("%s: version key is empty", s.name())
	case countWildcards(segs) > 0:
		return nil, fmt.Errorf("%s: version key %q cannot have a \"*\"", s.name(), s.VersionKey)
	}
	return segs, nil
}

// checkFile checks s for the functions that read s.File.
func (s Spec) checkFile() error {
	if !filepath.IsAbs(s.File) {
		return fmt.Errorf("config file %q is not an absolute path", s.File)
	}
	_, err := s.versionPath()
	return err
}

// ReadVersion reads spec.File and returns the version it holds,
// "MAJOR.MINOR.PATCH[-PRERELEASE]". Errors name the file and what is wrong.
func ReadVersion(spec Spec) (string, error) {
	if err := spec.checkFile(); err != nil {
		return "", err
	}
	doc, err := os.ReadFile(spec.File)
	if err != nil {
		return "", fmt.Errorf("read config: %w", err)
	}
	return VersionOf(doc, spec)
}

// VersionOf returns the version that the config doc holds, as ReadVersion.
func VersionOf(doc []byte, spec Spec) (string, error) {
	segs, err := spec.versionPath()
	if err != nil {
		return "", err
	}
	root, err := decodeJSON(doc)
	if err != nil {
		return "", fmt.Errorf("%s: not a JSON document: %w", spec.name(), err)
	}
	return versionAt(root, segs, spec)
}

func versionAt(root any, segs []string, spec Spec) (string, error) {
	v, found, err := lookup(root, segs)
	switch {
	case err != nil:
		return "", fmt.Errorf("%s: version %s: %w", spec.name(), spec.VersionKey, err)
	case !found:
		return "", fmt.Errorf("%s: no version at %s", spec.name(), spec.VersionKey)
	}
	ver, err := Decode(spec.Encoding, v)
	if err != nil {
		return "", fmt.Errorf("%s: version at %s: %w", spec.name(), spec.VersionKey, err)
	}
	return ver, nil
}

// Report describes a migration that was, or would be, applied.
type Report struct {
	// From and To are the config's versions before and after.
	From, To string
	// Steps are the steps applied; none when the config was left alone.
	Steps []Step
	// Diff is a unified diff of the JSON before and after, each indented by
	// two spaces with its members in order; empty when nothing changed.
	Diff string
	// Output is the tail of an exec-mode command's standard output and
	// error, interleaved as they arrived.
	Output string
}

// mismatchError is a config whose version is not the live version's minor.
type mismatchError struct {
	file, config, live string
}

func (e *mismatchError) Error() string {
	return fmt.Sprintf("%s: config version %s does not match the live version %s", e.file, e.config, e.live)
}

// IsMismatch reports whether err is the refusal of a config whose version
// does not have the live version's MAJOR.MINOR.
func IsMismatch(err error) bool {
	var m *mismatchError
	return errors.As(err, &m)
}

// Migrate migrates the config doc from version from to version to (full
// versions) with migs, in memory, and returns the new document, whose version
// (at spec.VersionKey, in spec.Encoding) is to. The document changes by the
// migration only: its members keep their order (a member a move renames
// within its object keeps its place, a new member goes at the end of its
// object), and it keeps doc's layout: its indentation (spaces or tabs, or
// one line), line ends, spacing and final newline, and an object or array
// written on one line stays on one line. Numbers are kept as written;
// strings are written as encoding/json writes them, without escaping HTML.
//
// The config's version must have from's MAJOR.MINOR; otherwise Migrate
// refuses, naming both versions (see IsMismatch). Migrate does no I/O and
// does not panic on any input. It is not idempotent by itself: a config that
// is already at to no longer matches from (Apply handles that redo).
func Migrate(doc []byte, spec Spec, from, to string, migs []Migration) ([]byte, Report, error) {
	segs, err := spec.versionPath()
	if err != nil {
		return nil, Report{}, err
	}
	live, err := parseVersion(from)
	if err != nil {
		return nil, Report{}, fmt.Errorf("migrate %s: live version: %w", spec.name(), err)
	}
	target, err := parseVersion(to)
	if err != nil {
		return nil, Report{}, fmt.Errorf("migrate %s: target version: %w", spec.name(), err)
	}
	newVersion, err := Encode(spec.Encoding, target.String())
	if err != nil {
		return nil, Report{}, fmt.Errorf("migrate %s: %w", spec.name(), err)
	}
	root, err := decodeJSON(doc)
	if err != nil {
		return nil, Report{}, fmt.Errorf("%s: not a JSON document: %w", spec.name(), err)
	}
	current, err := versionAt(root, segs, spec)
	if err != nil {
		return nil, Report{}, err
	}
	if cur, _ := parseVersion(current); cur.series() != live.series() {
		return nil, Report{}, &mismatchError{file: spec.name(), config: current, live: live.String()}
	}
	steps, err := Plan(migs, from, to)
	if err != nil {
		return nil, Report{}, fmt.Errorf("migrate %s: %w", spec.name(), err)
	}
	before, err := encodeJSON(root)
	if err != nil {
		return nil, Report{}, fmt.Errorf("%s: %w", spec.name(), err)
	}
	growth := newBudget(root)
	dir := "up"
	if target.minor < live.minor {
		dir = "down"
	}
	for _, s := range steps {
		if root, err = applyOps(root, s.Ops, dir, growth); err != nil {
			return nil, Report{}, fmt.Errorf("migrate %s from %s to %s: %s: %w", spec.name(), s.From, s.To, s.File, err)
		}
	}
	if root, err = setAt(root, segs, newVersion, false); err != nil {
		return nil, Report{}, fmt.Errorf("migrate %s: set version %s: %w", spec.name(), spec.VersionKey, err)
	}
	after, err := encodeJSON(root)
	if err != nil {
		return nil, Report{}, fmt.Errorf("migrate %s: %w", spec.name(), err)
	}
	out, err := layoutOf(doc).encode(root)
	if err != nil {
		return nil, Report{}, fmt.Errorf("migrate %s: %w", spec.name(), err)
	}
	if got, err := VersionOf(out, spec); err != nil || got != target.String() {
		return nil, Report{}, fmt.Errorf("migrate %s: the migrated config does not read back as version %s", spec.name(), target)
	}
	rep := Report{
		From:  current,
		To:    target.String(),
		Steps: steps,
		Diff:  unifiedDiff(spec.name()+" "+current, spec.name()+" "+target.String(), before, after),
	}
	return out, rep, nil
}

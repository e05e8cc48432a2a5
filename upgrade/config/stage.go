package config

import (
	"fmt"
	"path"
	"strings"
)

// StageConfig is [stage]: what `cutover stage` accepts in a version's trees. A source is
// hostile until checked: setuid and setgid bits, world-writable files and directories,
// devices, fifos and hard links are refused unless an allow list names the entry, and the
// bounds are checked before any space is used.
type StageConfig struct {
	// MaxBytes bounds the file contents of both trees, every file counted by its declared
	// size (a sparse or highly compressed member of a .tar.gz by its real size).
	MaxBytes int64 `toml:"max_bytes"`
	// MaxFiles bounds the entries of both trees; of a .tar.gz, every entry of the archive.
	MaxFiles int `toml:"max_files"`
	// MaxDepth bounds how many names deep an entry lies below its tree's root.
	MaxDepth int `toml:"max_depth"`
	// The allow lists hold path.Match patterns of entries relative to a tree's root, such
	// as "usr/sbin/helper" or "dev/*".
	AllowSetuid        []string `toml:"allow_setuid"`
	AllowSetgid        []string `toml:"allow_setgid"`
	AllowWorldWritable []string `toml:"allow_world_writable"`
	AllowDevices       []string `toml:"allow_devices"`
	AllowFifos         []string `toml:"allow_fifos"`
	AllowHardlinks     []string `toml:"allow_hardlinks"`
}

// baseStage bounds a source generously for real applications: 4 GiB, 200,000 entries, 64
// names deep.
func baseStage() StageConfig {
	return StageConfig{MaxBytes: 4 << 30, MaxFiles: 200_000, MaxDepth: 64}
}

func (s StageConfig) validate() []error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if s.MaxBytes < 1 {
		bad("stage.max_bytes %d: must be at least 1", s.MaxBytes)
	}
	if s.MaxFiles < 1 {
		bad("stage.max_files %d: must be at least 1", s.MaxFiles)
	}
	if s.MaxDepth < 1 {
		bad("stage.max_depth %d: must be at least 1", s.MaxDepth)
	}
	for _, list := range []struct {
		key      string
		patterns []string
	}{
		{"allow_setuid", s.AllowSetuid}, {"allow_setgid", s.AllowSetgid}, {"allow_world_writable", s.AllowWorldWritable},
		{"allow_devices", s.AllowDevices}, {"allow_fifos", s.AllowFifos}, {"allow_hardlinks", s.AllowHardlinks},
	} {
		for _, p := range list.patterns {
			if _, err := path.Match(p, ""); err != nil || p == "" || path.IsAbs(p) || path.Clean(p) != p ||
				p == ".." || strings.HasPrefix(p, "../") || strings.ContainsAny(p, "\x00\n") {
				bad("stage.%s: %q must be a clean pattern relative to a tree's root, such as \"usr/sbin/helper\"", list.key, p)
			}
		}
	}
	return errs
}

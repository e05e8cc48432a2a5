package staging

import (
	"fmt"
	"io/fs"
	"path"
	"strings"
)

// Policy is what a staged tree may hold and how large it may be. A source is hostile until
// checked: setuid and setgid bits, world-writable files and directories, devices, fifos and
// hard links are refused unless one of the matching Allow patterns names the entry, and the
// bounds are checked before any space is used. A bound of 0 is no bound.
//
// A pattern is matched with path.Match against the entry's name relative to its tree's root
// ("usr/sbin/helper"; "." is the root itself).
type Policy struct {
	MaxBytes int64 // the file contents of the trees, every file counted by its declared size
	MaxFiles int   // the entries of the trees; of a .tar.gz, every entry of the archive
	MaxDepth int   // how many names deep an entry lies below its tree's root

	AllowSetuid        []string
	AllowSetgid        []string
	AllowWorldWritable []string
	AllowDevices       []string
	AllowFifos         []string
	AllowHardlinks     []string
}

// allowed reports whether one of patterns matches name.
func allowed(patterns []string, name string) bool {
	for _, p := range patterns {
		if ok, _ := path.Match(p, name); ok {
			return true
		}
	}
	return false
}

// checkEntry refuses an entry of kind and mode at name that the policy does not allow. The
// error does not name the entry: the caller does.
func (p Policy) checkEntry(name string, kind byte, mode fs.FileMode) error {
	refuse := func(what, key string) error {
		return fmt.Errorf("%s (mode %04o): a staged tree holds none unless [stage] %s lists it", what, tarMode(mode), key)
	}
	switch {
	case (kind == 'c' || kind == 'b') && !allowed(p.AllowDevices, name):
		return refuse("a device", "allow_devices")
	case kind == 'p' && !allowed(p.AllowFifos, name):
		return refuse("a fifo", "allow_fifos")
	case mode&fs.ModeSetuid != 0 && !allowed(p.AllowSetuid, name):
		return refuse("setuid", "allow_setuid")
	case mode&fs.ModeSetgid != 0 && !allowed(p.AllowSetgid, name):
		return refuse("setgid", "allow_setgid")
	case (kind == 'f' || kind == 'd') && mode&0o002 != 0 && !allowed(p.AllowWorldWritable, name):
		return refuse("world-writable", "allow_world_writable")
	}
	return nil
}

// checkHardlink refuses a hard link at name that the policy does not allow.
func (p Policy) checkHardlink(name string) error {
	if !allowed(p.AllowHardlinks, name) {
		return fmt.Errorf("a hard link: a staged tree holds none unless [stage] allow_hardlinks lists it")
	}
	return nil
}

// budget counts what a source holds against a policy's bounds, as it is read.
type budget struct {
	p     Policy
	files int
	bytes int64
}

// entry counts one more entry at name (relative to its tree's root) and refuses it past
// MaxFiles or MaxDepth.
func (b *budget) entry(name string) error {
	b.files++
	if b.p.MaxFiles > 0 && b.files > b.p.MaxFiles {
		return fmt.Errorf("more than %d entries: [stage] max_files bounds a source", b.p.MaxFiles)
	}
	if d := strings.Count(name, "/") + 1; b.p.MaxDepth > 0 && name != "." && d > b.p.MaxDepth {
		return fmt.Errorf("%d names deep, more than %d: [stage] max_depth bounds a tree", d, b.p.MaxDepth)
	}
	return nil
}

// size counts n more bytes of file contents and refuses them past MaxBytes.
func (b *budget) size(n int64) error {
	if n < 0 {
		return fmt.Errorf("a negative size")
	}
	b.bytes += n
	if b.p.MaxBytes > 0 && (b.bytes > b.p.MaxBytes || b.bytes < 0) {
		return fmt.Errorf("its %d bytes take the source past %d bytes: [stage] max_bytes bounds a source", n, b.p.MaxBytes)
	}
	return nil
}

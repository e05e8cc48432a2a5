package config

import (
	"fmt"
	"path"
	"regexp"
	"strings"
)

// DaemonsConfig is [daemons]: which processes of a node are the application's daemons. They
// are the only processes cutover ever signals (docs/design.md §9): a daemon of another
// version that survived a stop is ended by pid, and any other process of an old tree is
// reported and left alone.
type DaemonsConfig struct {
	// Users are the accounts the daemons run as. A process is one of the daemons only when its
	// real, effective, saved and file-system user ids all belong to one of them, so that no
	// other user can make a process of theirs count as a daemon.
	Users []string `toml:"users"`
	// PidFiles are the daemons' pid files, as absolute paths or glob patterns. A pid file
	// counts only when it is a regular file (not a link) owned by one of Users and writable by
	// its owner alone. A process it names is one of the daemons, whatever its executable;
	// without pid files, the daemons are the processes of Users whose executable, or whose
	// interpreter's script, lies in the application's version trees.
	PidFiles []string `toml:"pidfiles"`
}

// baseDaemons are root's processes, judged by their executables and scripts.
func baseDaemons() DaemonsConfig { return DaemonsConfig{Users: []string{"root"}} }

// userName is what a daemons.users entry may be: a POSIX-portable account name.
var userName = regexp.MustCompile(`^[a-z_][a-z0-9_.-]{0,31}$`)

// maxPidFiles bounds daemons.pidfiles.
const maxPidFiles = 32

func (d DaemonsConfig) validate() []error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if len(d.Users) == 0 {
		bad("daemons.users: name at least one account the application's daemons run as, such as \"root\"")
	}
	for _, u := range d.Users {
		if !userName.MatchString(u) {
			bad("daemons.users: %q is not an account name (lower-case letters, digits, '_', '.', '-')", u)
		}
	}
	if len(d.PidFiles) > maxPidFiles {
		bad("daemons.pidfiles: %d patterns, at most %d", len(d.PidFiles), maxPidFiles)
	}
	for _, p := range d.PidFiles {
		if _, err := path.Match(p, ""); err != nil || !cleanAbs(p) || strings.ContainsAny(p, "\t\r") || p == "/" {
			bad("daemons.pidfiles: %q must be a clean absolute path or glob pattern, such as \"/run/demoapp/*.pid\"", p)
		}
	}
	return errs
}

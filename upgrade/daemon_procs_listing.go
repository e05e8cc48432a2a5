package upgrade

import (
	"bytes"
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"

	"github.com/cutover/cutover/nodes"
)

// Bounds of what a node's process listing may hold; past them it is refused, not cut.
const (
	maxProcRecords = 200_000
	maxProcArgs    = 8
	maxProcMaps    = 64
)

// nodeProc is one process of the daemons' users that a node listed.
type nodeProc struct {
	pid   int
	uids  [4]uint32 // real, effective, saved, file system
	start uint64    // clock ticks since the node's boot
	exe   string    // the physical path of its executable, "" when unreadable
	args  []string  // its first arguments, for an interpreter
	maps  []string  // files under a base it maps, outside the live trees
}

// procListing is a node's answer to procScript.
type procListing struct {
	boot                           string
	lib, share, liveLib, liveShare string // physical paths
	uids                           map[uint32]bool
	pidFiles                       map[int]bool
	procs                          map[int]*nodeProc
	others                         []string // "PID (uid UID) EXE" of other users' processes in a tree
	pidGlobs                       bool     // the application names its daemons' pid files
}

// parsePid accepts a pid as a node prints it: a decimal above 1 within the kernel's bounds.
func parsePid(s string) (int, bool) {
	if s == "" || len(s) > 10 || strings.TrimLeft(s, "0123456789") != "" {
		return 0, false
	}
	n, err := strconv.Atoi(s)
	return n, err == nil && n > 1 && n <= 1<<22
}

// parseProcListing reads procScript's output. A record that is malformed, or a listing
// without its end record, is an error: nothing is acted on from a listing that was not read
// whole.
func parseProcListing(out []byte) (procListing, error) {
	l := procListing{uids: map[uint32]bool{}, pidFiles: map[int]bool{}, procs: map[int]*nodeProc{}}
	if len(out) == 0 || out[len(out)-1] != 0 {
		return l, errors.New("the process listing was cut off (no end record)")
	}
	records := bytes.Split(out[:len(out)-1], []byte{0})
	if len(records) > maxProcRecords {
		return l, fmt.Errorf("the process listing has %d records, more than %d", len(records), maxProcRecords)
	}
	ended := false
	for _, rec := range records {
		if ended {
			return l, errors.New("the process listing goes on past its end record")
		}
		s := string(rec)
		if pid, arg, ok := cmdlineRecord(s); ok {
			if p := l.procs[pid]; p != nil && len(p.args) < maxProcArgs {
				p.args = append(p.args, arg)
			}
			continue
		}
		kind, rest, _ := strings.Cut(s, " ")
		if kind == "E" {
			ended = true
			continue
		}
		err := l.record(kind, rest)
		if errors.Is(err, errBadRecord) {
			return l, fmt.Errorf("malformed record in the process listing: %s", escapeShort(s))
		}
		if err != nil {
			return l, err
		}
	}
	if !ended {
		return l, errors.New("the process listing was cut off (no end record)")
	}
	return l, nil
}

// errBadRecord is a record of the process listing that does not read as its kind says.
var errBadRecord = errors.New("malformed record")

// record reads one record of the listing but its end and the processes' arguments: kind is
// its letter, rest what follows it. A record that does not read is errBadRecord.
func (l *procListing) record(kind, rest string) error {
	switch kind {
	case "B":
		if !nodes.ValidBoot(rest) {
			return fmt.Errorf("the process listing's boot identity is malformed: %s", escapeShort(rest))
		}
		l.boot = rest
	case "R", "S", "L", "M":
		if rest != "" && (!path.IsAbs(rest) || path.Clean(rest) != rest) {
			return errBadRecord
		}
		*map[string]*string{"R": &l.lib, "S": &l.share, "L": &l.liveLib, "M": &l.liveShare}[kind] = rest
	case "U":
		u, err := strconv.ParseUint(rest, 10, 32)
		if err != nil {
			return errBadRecord
		}
		l.uids[uint32(u)] = true
	case "F":
		pid, ok := parsePid(rest)
		if !ok {
			return errBadRecord
		}
		l.pidFiles[pid] = true
	case "P":
		p, ok := procRecord(rest)
		if !ok {
			return errBadRecord
		}
		l.procs[p.pid] = p
	case "X":
		return l.otherRecord(rest)
	case "m":
		pidText, file, ok := strings.Cut(rest, " ")
		pid, okPid := parsePid(pidText)
		if !ok || !okPid {
			return errBadRecord
		}
		if p := l.procs[pid]; p != nil && len(p.maps) < maxProcMaps {
			p.maps = append(p.maps, file)
		}
	default:
		return errBadRecord
	}
	return nil
}

// procRecord reads a process record "PID RUID EUID SUID FSUID START EXE".
func procRecord(rest string) (*nodeProc, bool) {
	f := strings.SplitN(rest, " ", 7)
	if len(f) != 7 {
		return nil, false
	}
	pid, ok := parsePid(f[0])
	if !ok {
		return nil, false
	}
	p := &nodeProc{pid: pid, exe: f[6]}
	for i := range p.uids {
		u, err := strconv.ParseUint(f[1+i], 10, 32)
		if err != nil {
			return nil, false
		}
		p.uids[i] = uint32(u)
	}
	start, err := strconv.ParseUint(f[5], 10, 64)
	if err != nil {
		return nil, false
	}
	p.start = start
	return p, true
}

// otherRecord reads a record "PID UID EXE" of another user's process running from a
// version's tree, kept for the warning (at most maxProcMaps of them).
func (l *procListing) otherRecord(rest string) error {
	f := strings.SplitN(rest, " ", 3)
	if len(f) != 3 {
		return errBadRecord
	}
	_, okPid := parsePid(f[0])
	uid, err := strconv.ParseUint(f[1], 10, 32)
	if !okPid || err != nil {
		return errBadRecord
	}
	if len(l.others) < maxProcMaps {
		l.others = append(l.others, fmt.Sprintf("%s (uid %d) %s", f[0], uid, escapeShort(f[2])))
	}
	return nil
}

// cmdlineRecord reads grep's record "PID/cmdline:ARG".
func cmdlineRecord(s string) (int, string, bool) {
	head, arg, ok := strings.Cut(s, "/cmdline:")
	if !ok {
		return 0, "", false
	}
	pid, ok := parsePid(head)
	return pid, arg, ok
}

// escapeShort quotes s for a message, control characters escaped, cut to 200 bytes.
func escapeShort(s string) string {
	if len(s) > 200 {
		return strconv.Quote(s[:200]) + "..."
	}
	return strconv.Quote(s)
}

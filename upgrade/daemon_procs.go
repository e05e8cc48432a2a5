package upgrade

import (
	"fmt"
	"path"
	"slices"
	"strings"
)

// Which processes are the application's daemons, and which of those are of another version
// (docs/design.md §9). A node is an untrusted peer, and any user of a node controls the names
// and paths of their own processes, so the node's side only lists facts, framed so that no
// byte of a path can pass for a separator, and the master decides:
//
//   - A process is one of the application's daemons when its real, effective, saved and
//     file-system user ids all belong to [daemons].users, and a trusted pid file of
//     [daemons].pidfiles names it, or its executable lies in one of the application's trees
//     (<libdir>/<app>, <datadir>/<app>), or it is an interpreter whose script does.
//   - A daemon is of another version when its executable, its interpreter's script or a file
//     it maps lies in a version tree other than the live one, or when (a daemon a pid file
//     names; without pid files, one whose executable lies in the trees) it started before the
//     command that last stopped the node's daemons in this run (the shell reports when that
//     command started, in the node's clock ticks since boot): such a daemon survived the stop
//     and runs what it loaded before the switch, whatever its executable says (an interpreter
//     that read its script through the links, a daemon in a mount namespace of its own). A
//     daemon started after the stop began (by the run's start, or by the node's init after the
//     switch) is not judged by its age.
//   - Only those are signalled, by pid and start time checked again on the node right before
//     each signal, never a process group or -1. Another user's process of an old tree is
//     reported and left alone: it never fails a run.

// procScript lists the node's processes that may matter, as NUL-terminated records. Its
// arguments are the lib and share bases, the lib and share links, the daemons' users (comma
// separated) and the pid file patterns. Records, each a letter, a space and its fields:
//
//	B BOOT/START            the node's boot identity ("" when it cannot be read)
//	R PATH, S PATH          the physical lib and share bases ("" when missing)
//	L PATH, M PATH          the physical trees the lib and share links name
//	U UID                   a user id of the daemons' users
//	F PID                   a pid that a trusted pid file names
//	P PID RUID EUID SUID FSUID START EXE   a process of the daemons' users that may be one
//	X PID UID EXE           another user's process whose executable lies in a tree
//	m PID PATH              a file under a base that a listed process maps (not a live tree)
//	E                       the end of the listing
//
// and, for the listed interpreters, grep's records of their first arguments:
//
//	PID/cmdline:ARG
//
// An executable's newlines are given as \x01. A process that ends while it is listed is left
// out. It changes nothing. A process's status is read only for a process it may list (one in a
// tree, named by a pid file, or an interpreter): the shell reads a file a byte at a time, and a
// busy node has hundreds of processes of root (BenchmarkProcListing).
const procScript = `lb=$1 sb=$2 ll=$3 sl=$4 users=$5
shift 5
cutover_st() { set -- ${1##*) }; st=${20} state=$1; }
r= s= l= m=
cd -P -- "$lb" 2>/dev/null && r=$PWD
cd -P -- "$sb" 2>/dev/null && s=$PWD
if cd -P -- "$ll" 2>/dev/null; then l=$PWD; else l=$(readlink -- "$ll") || l=; fi
if cd -P -- "$sl" 2>/dev/null; then m=$PWD; else m=$(readlink -- "$sl") || m=; fi
cd / || exit 1
b= st=
{ read -r b </proc/sys/kernel/random/boot_id; } 2>/dev/null
{ read -r x </proc/1/stat; } 2>/dev/null && cutover_st "$x"
if [ -n "$b$st" ]; then printf 'B %s/%s\000' "$b" "$st"; else printf 'B \000'; fi
printf 'R %s\000S %s\000L %s\000M %s\000' "$r" "$s" "$l" "$m"
uids=
[ -r /etc/passwd ] && while IFS=: read -r n _ u _; do
	case ",$users," in *",$n,"*) case $u in ''|*[!0-9]*) ;; *) uids="$uids $u"; printf 'U %s\000' "$u";; esac;; esac
done </etc/passwd
inu() { case $1 in ""|*[!0-9]*) return 1;; esac; case " $uids " in *" $1 "*) return 0;; esac; return 1; }
n=$# k=0
for p do
	IFS='
'
	for f in $p; do [ -f "$f" ] && [ $k -lt 64 ] && { set -- "$@" "$f"; k=$((k + 1)); }; done
	unset IFS
done
shift $n
pids=
for f do
	o=$(find "$f" -maxdepth 0 -type f ! -perm /022 -printf '%U' 2>/dev/null) || continue
	inu "$o" || continue
	d=$(dirname -- "$f")
	[ -n "$(find "$d" -maxdepth 0 -perm -002 ! -perm -1000 2>/dev/null)" ] && continue
	p=; { read -r p <"$f"; } 2>/dev/null
	case $p in ''|*[!0-9]*|0|1) continue;; esac
	pids="$pids $p"
	printf 'F %s\000' "$p"
done
cd /proc || exit 1
{ find [0-9]*/exe -maxdepth 0 -printf '%h %U %l\000' 2>/dev/null; [ $? -ne 126 ] ||
	find . -mindepth 2 -maxdepth 2 -name exe -printf '%h %U %l\000' 2>/dev/null; } | tr '\n\000' '\001\n' | {
ip= mp=
intree() { case $1 in "$r"/*) [ -n "$r" ] && return;; esac; case $1 in "$s"/*) [ -n "$s" ];; *) false;; esac; }
while read -r d o e; do
	d=${d#./}
	case $d in ''|*[!0-9]*) continue;; esac
	[ "$d" = $$ ] && continue
	if [ "$o" != 0 ] && ! inu "$o"; then
		intree "$e" && printf 'X %s %s %s\000' "$d" "$o" "$e"
		continue
	fi
	w= it=
	intree "$e" && w=1
	case " $pids " in *" $d "*) w=1;; esac
	case ${e##*/} in python*|perl*|ruby*|sh|bash|dash|ash|ksh*|mksh|zsh|node|nodejs|php*|lua*|tclsh*|java) w=1 it=1;; esac
	[ -n "$w" ] || continue
	ru= eu= su= fu=
	{ while read -r x a1 a2 a3 a4; do [ "$x" = Uid: ] && { ru=$a1 eu=$a2 su=$a3 fu=$a4; break; }; done <"$d/status"; } 2>/dev/null
	case $ru in ""|*[!0-9]*) continue;; esac
	if ! { inu "$ru" && inu "$eu" && inu "$su" && inu "$fu"; }; then
		intree "$e" && printf 'X %s %s %s\000' "$d" "$ru" "$e"
		continue
	fi
	st=; { read -r x <"$d/stat"; } 2>/dev/null && cutover_st "$x"
	case $st in ""|*[!0-9]*) continue;; esac
	[ -z "$it" ] || ip="$ip $d/cmdline"
	mp="$mp $d/maps"
	printf 'P %s %s %s %s %s %s %s\000' "$d" "$ru" "$eu" "$su" "$fu" "$st" "$e"
done
[ -z "$ip" ] || grep -z -a -H -s -m 8 '' $ip
[ -n "$mp" ] && [ -n "$r$s" ] && r=${r:+$r/} s=${s:+$s/} l=${l:+$l/} m=${m:+$m/} awk '
	FNR == 1 { n = 0; f = FILENAME; sub(/\/maps$/, "", f) }
	{
		i = index($0, " /"); if (!i) next
		p = substr($0, i + 1)
		if (!((ENVIRON["r"] != "" && index(p, ENVIRON["r"]) == 1) || (ENVIRON["s"] != "" && index(p, ENVIRON["s"]) == 1))) next
		if ((ENVIRON["l"] != "" && index(p, ENVIRON["l"]) == 1) || (ENVIRON["m"] != "" && index(p, ENVIRON["m"]) == 1)) next
		if (seen[f " " p]++ || n++ >= 64) next
		print "m " f " " p
	}' $mp 2>/dev/null | tr '\n' '\000'
}
printf 'E\000'`

// killDaemonsScript ends the processes its arguments name, the node's boot id followed by
// pairs of a pid and its start time: SIGTERM, then SIGKILL to what is left after ten seconds.
// Before every signal it reads the process's start time again, so a pid given meanwhile to
// another process is never signalled, and it signals nothing at all when the node booted
// since the listing. It exits 1 naming the pids that still run. It holds no single quote, so
// that it is recognisable in a quoted command line.
const killDaemonsScript = `want=$1; shift
b=; { read -r b </proc/sys/kernel/random/boot_id; } 2>/dev/null
[ "$b" = "$want" ] || { echo "the node booted since its processes were listed: nothing signalled" >&2; exit 2; }
cutover_st() { set -- ${1##*) }; st=${20} state=$1; }
alive() {
	case $1 in ""|*[!0-9]*|0|1) return 1;; esac
	{ read -r x </proc/"$1"/stat; } 2>/dev/null || return 1
	cutover_st "$x"
	[ "$st" = "$2" ] || return 1
	case $state in Z|X) return 1;; esac
}
sig() { g=$1; shift; left=; while [ $# -ge 2 ]; do if alive "$1" "$2"; then [ -z "$g" ] || kill -"$g" "$1" 2>/dev/null; left="$left $1 $2"; fi; shift 2; done; }
sig TERM "$@"
i=0; while [ -n "$left" ] && [ $i -lt 20 ]; do sleep 0.5; set -- $left; sig "" "$@"; i=$((i + 1)); done
[ -z "$left" ] && exit 0
set -- $left; sig KILL "$@"; sleep 0.5; set -- $left; sig "" "$@"
[ -z "$left" ] && exit 0
set -- $left; p=; while [ $# -ge 2 ]; do p="$p $1"; shift 2; done
echo "still running:$p" >&2; exit 1`

// startRef is when a run last stopped a node's daemons: the node's boot identity and the
// start time of the stop command, in clock ticks since that boot.
type startRef struct {
	boot string
	tick uint64
}

// oldDaemon is a daemon of another version that a node runs.
type oldDaemon struct {
	pid   int
	start uint64
	why   string
}

func (d oldDaemon) String() string { return fmt.Sprintf("pid %d %s", d.pid, d.why) }

// aged reports whether daemon p is judged by its age: a daemon its pid file names, or, where
// the application names no pid files, one whose executable lies in its trees. Other processes
// of the trees (an interpreter running a helper script, a daemon's child) are judged by their
// paths alone: their start says nothing of whether they survived a stop.
func (l procListing) aged(p *nodeProc, t trees) bool {
	if l.pidGlobs {
		return l.pidFiles[p.pid]
	}
	return p.exe != "" && t.inTree(p.exe)
}

// judged is what a node's listing says about its daemons.
type judged struct {
	old    []oldDaemon
	others []string
}

// trees are the application's bases as a judgement compares paths with them, each as the
// node gave it physically and as the configuration names it, and the names of the live
// version directories in each.
type trees struct {
	libBases, shareBases []string
	liveLib, liveShare   string // "" when the link names no directory of its base
	// isVersion reports whether a name in a base is a version directory, as opposed to
	// "default" or what else an application keeps there (Ganeti's tools/, daemon-util).
	isVersion func(name string) bool
}

// treesOf are the trees of listing l, with the configured bases lib and share, whose version
// directories isVersion recognises.
func treesOf(l procListing, lib, share string, isVersion func(string) bool) trees {
	t := trees{isVersion: isVersion}
	add := func(list []string, b string) []string {
		if b != "" && !slices.Contains(list, b) {
			list = append(list, b)
		}
		return list
	}
	t.libBases = add(add(nil, l.lib), lib)
	t.shareBases = add(add(nil, l.share), share)
	if l.lib != "" && path.Dir(l.liveLib) == l.lib {
		t.liveLib = path.Base(l.liveLib)
	}
	if l.share != "" && path.Dir(l.liveShare) == l.share {
		t.liveShare = path.Base(l.liveShare)
	}
	return t
}

// versionDir names the directory of a base that p lies in: the base's live name (or "") and
// the directory's name; ok is false when p lies in no base.
func (t trees) versionDir(p string) (live, dir string, ok bool) {
	p = path.Clean(p)
	for _, b := range []struct {
		bases []string
		live  string
	}{{t.libBases, t.liveLib}, {t.shareBases, t.liveShare}} {
		for _, base := range b.bases {
			if rest, found := strings.CutPrefix(p, base+"/"); found {
				dir, _, _ = strings.Cut(rest, "/")
				return b.live, dir, true
			}
		}
	}
	return "", "", false
}

// inTree reports whether p lies in one of the application's bases.
func (t trees) inTree(p string) bool {
	_, _, ok := t.versionDir(p)
	return ok
}

// oldTree reports whether p lies in a version tree other than the live one. A path through
// anything else of a base ("default", which reaches the live tree through the links, or an
// application's own entries) is not; where the live tree is not known, nothing is judged old.
func (t trees) oldTree(p string) bool {
	live, dir, ok := t.versionDir(p)
	return ok && live != "" && dir != live && t.isVersion(dir)
}

// daemon reports whether p is one of the application's daemons.
func (l procListing) daemon(p *nodeProc, t trees) bool {
	for _, u := range p.uids {
		if !l.uids[u] {
			return false
		}
	}
	if l.pidFiles[p.pid] || p.exe != "" && t.inTree(p.exe) {
		return true
	}
	for _, a := range p.args {
		if path.IsAbs(a) && t.inTree(a) {
			return true
		}
	}
	return false
}

// judge says which of l's daemons are of another version, and which other users' processes
// run from a tree; isVersion recognises a version directory's name. since is when the run
// last stopped the node's daemons; it counts only in the boot it was taken in.
func judge(l procListing, lib, share string, isVersion func(string) bool, since startRef) judged {
	t := treesOf(l, lib, share, isVersion)
	var j judged
	pids := make([]int, 0, len(l.procs))
	for pid := range l.procs {
		pids = append(pids, pid)
	}
	slices.Sort(pids)
	for _, pid := range pids {
		p := l.procs[pid]
		if !l.daemon(p, t) {
			if p.exe != "" && t.oldTree(p.exe) {
				j.others = append(j.others, fmt.Sprintf("%d (uid %d) %s", p.pid, p.uids[0], escapeShort(p.exe)))
			}
			continue
		}
		why := ""
		if p.exe != "" && t.oldTree(p.exe) {
			why = "runs " + escapeShort(p.exe)
		}
		if why == "" {
			for _, a := range p.args {
				if path.IsAbs(a) && t.oldTree(a) {
					why = "runs the script " + escapeShort(a)
					break
				}
			}
		}
		if why == "" {
			for _, m := range p.maps {
				if t.oldTree(strings.TrimSuffix(m, " (deleted)")) {
					why = "maps " + escapeShort(m)
					break
				}
			}
		}
		if why == "" && since.tick > 0 && since.boot != "" && since.boot == l.boot && p.start < since.tick && l.aged(p, t) {
			why = fmt.Sprintf("(%s) started before the run stopped the node's daemons (at tick %d, before %d): it survived the stop", escapeShort(p.exe), p.start, since.tick)
		}
		if why != "" {
			j.old = append(j.old, oldDaemon{pid: p.pid, start: p.start, why: why})
		}
	}
	j.others = append(j.others, l.others...)
	return j
}

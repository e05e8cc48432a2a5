package nodes

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"
)

// Every command of Run and RunShell runs under a watchdog (RunInput's
// commands over SSH, which end by themselves, do not; local ones do): a small POSIX sh program
// (below) that cutover sends as the command line, so nodes need nothing but
// sh and /proc (procps' pgrep, where present, shortens a kill).
// The watchdog
//
//   - keeps the command's standard input as fd 3 and gives the command
//     /dev/null instead;
//   - when the Pool has a command tag, writes a record of the command
//     (process group, pid, start time, boot id, node name) to the record
//     directory;
//   - forks the watcher, a subshell that reads the kept standard input and
//     holds a copy of standard output;
//   - execs `sh -c LINE` in its own place, so the command's exit status (or
//     the signal that killed it) is what sshd or cutover sees, unchanged.
//
// cutover keeps the command's standard input open while it waits. It closes
// it to stop the command (timeout or cancellation), and when cutover dies
// the kernel closes it (the pipe locally, the TCP connection to sshd). When
// standard input reaches end of file while the command still runs, the
// watcher execs the killer, which sends SIGTERM to the command's process
// group, SIGKILL to what is left after watcherGrace, having removed the
// record first, and so lets go of standard output only when the group is
// gone: a Run that stops a
// command returns once its process group is gone. When the command ends by
// itself, sshd closes its standard input; locally cutover writes "done"
// first. Either way the watcher exits without killing anything, so
// processes the command started in the background (daemons) keep running,
// as they always did; over SSH it removes the record first, and locally
// cutover removes it (removeLocalRecord), which spares every command of the
// master a process of its own for the removal.
//
// The watcher stays in the command's process group from its fork to its
// end, ignoring SIGTERM, and dies of its own SIGKILL. That is what makes the
// kill safe: a process group's id cannot be given to a new process while a
// member of the group lives, so the group the watcher signals is always the
// command's, never an unrelated one that was given the same number after
// the command's processes had all gone (on a busy host with pid_max 32768,
// numbers come round within minutes). Locally
// the command's shell is started in a process group of its own with
// Pdeathsig SIGKILL; since the shell may then die before the watcher reads
// end of file, a local watcher ("local" mode) kills the group at any end of
// file not preceded by "done", whether or not the shell still lives. A local
// RunInput command keeps its standard input; its watcher reads the pipe that
// cutover hands it as descriptor 3 ("input" mode, otherwise as "local").

// watcherGrace is how long a stopped command's processes have between
// SIGTERM and SIGKILL; killerScript polls 10 times 0.1s.
const watcherGrace = time.Second

// killWait bounds how long stopping a command waits for its watcher to
// report the process group gone (watcherGrace and some slack), so that a
// node that stopped answering does not hold cutover up.
const killWait = watcherGrace + 2*time.Second

// rootRecordDir is where the records of a root login's commands live; other
// logins keep theirs in ~/.cutover/cmd.
const rootRecordDir = "/run/cutover/cmd"

// recordDirScript sets cutover_dir to the record directory, "" when there is
// none. Only root can write /run; without it (or for other logins) the
// login's home directory holds the records. The watchdog's own variables
// carry the cutover_ prefix: the command inherits those that its
// environment happens to export.
const recordDirScript = `if [ -w /run ]; then cutover_dir=` + rootRecordDir + `; else cutover_dir=${HOME:+$HOME/.cutover/cmd}; fi
`

// procStatScript defines cutover_pstat, which sets cutover_pg and
// cutover_start to the process group (field 5) and start time (field 22) of
// the /proc/PID/stat line it is given; the command name, which may hold
// spaces, is cut off first.
const procStatScript = `cutover_pstat() { set -- ${1##*) }; cutover_pg=$3 cutover_start=${20}; }
`

// killerScript kills the process group $1 and removes the record file $2
// (if not ""). The watcher execs it in its own place, staying in the group,
// so $$ is the watcher's pid. Between SIGTERM and SIGKILL it waits while a
// process of the group other than itself runs; zombies that init has yet
// to reap do not count. procps' pgrep says so quickly where it is
// installed; elsewhere the shell reads /proc itself. Its last act kills the
// watcher with the group. It must not contain single quotes: the wrapper
// quotes it so.
const killerScript = `pg=$1 rec=$2
kill -TERM -"$pg" 2>/dev/null
quick=
pgrep -g "$pg" -r R >/dev/null 2>&1
[ $? -le 1 ] && quick=1
i=0
while [ $i -lt 10 ]; do
	left=
	if [ -n "$quick" ]; then
		for p in $(pgrep -g "$pg" -r D,R,S,T,t,W 2>/dev/null); do [ "$p" = $$ ] || left=1; done
	else
		for f in /proc/[0-9]*/stat; do
			{ read -r l <"$f"; } 2>/dev/null || continue
			[ "${l%% *}" = $$ ] && continue
			set -- ${l##*) }
			[ "$3" = "$pg" ] || continue
			case $1 in Z|X) continue;; esac
			left=1
			break
		done
	fi
	[ -n "$left" ] || break
	sleep 0.1
	i=$((i+1))
done
[ -z "$rec" ] || rm -f "$rec"
kill -KILL -"$pg" 2>/dev/null
`

// wrapperScript is the watchdog; its arguments are the command line, the
// mode ("local", "input" or "ssh"), the command tag ("" for no record), the node's
// name and the connection's fence ("" for none). A tagged command whose tag's fence file
// holds another connection's fence is not run (see fenceScript): it exits fencedStatus,
// having written its record first, so that a reap that wrote the fence after this looked
// finds the record and kills the command. In the watcher, $$ is still the pid of the shell
// that execs the command.
const wrapperScript = `case $2 in input) ;; *) exec 3<&0 </dev/null;; esac
` + procStatScript + `cutover_pg=$$ cutover_start=-
{ read -r cutover_l </proc/$$/stat; } 2>/dev/null && cutover_pstat "$cutover_l"
case $cutover_pg in ''|0|1|*[!0-9]*) cutover_pg=$$;; esac
cutover_rec=
if [ -n "$3" ]; then
	` + recordDirScript + `	if [ -n "$cutover_dir" ]; then
		[ -d "$cutover_dir" ] || mkdir -p -m 700 "$cutover_dir" 2>/dev/null
		{ read -r cutover_boot </proc/sys/kernel/random/boot_id; } 2>/dev/null || cutover_boot=-
		cutover_rec=$cutover_dir/$3.$$
		{ echo "$cutover_pg $$ $cutover_start $cutover_boot $4" >"$cutover_rec"; } 2>/dev/null || cutover_rec=
		cutover_f=
		{ read -r cutover_f <"$cutover_dir/$3.$4.fence"; } 2>/dev/null
		if [ -n "$5" ] && [ -n "$cutover_f" ] && [ "$cutover_f" != "$5" ]; then
			[ -z "$cutover_rec" ] || rm -f "$cutover_rec"
			echo "cutover: not run: a newer connection to this node took over the run's commands" >&2
			exit ` + fencedStatus + `
		fi
	fi
fi
{
	trap "" TERM
	k=1
	while read -r l; do [ "$l" = done ] && k= && break; done
	if [ -n "$k" ] && { [ "$2" != ssh ] || kill -0 $$ 2>/dev/null; }; then
		exec sh -c '` + killerScript + `' cutover-kill "$cutover_pg" "$cutover_rec"
	fi
	[ -z "$cutover_rec" ] || [ "$2" != ssh ] || exec rm -f "$cutover_rec"
} <&3 4>&1 >/dev/null 2>&1 &
exec sh -c "$1" 3<&-
`

// reapScript first writes the connection's fence $g (when not "") to tag $t's fence file, then
// kills the commands recorded under $t for node $n whose process still runs (same boot, same
// start time) with their process group, and removes every record of $t for $n (and unreadable
// ones of $t); then, for an owner $o (not ""), it ends the node's older connections of that
// owner and records its own (see connScript). It never exits, so that a command line may follow
// it.
const reapScript = recordDirScript + fenceScript + `{ read -r b </proc/sys/kernel/random/boot_id; } 2>/dev/null || b=-
` + procStatScript + `[ -n "$cutover_dir" ] && [ -d "$cutover_dir" ] && for f in "$cutover_dir/$t".*; do
	[ -f "$f" ] || continue
	case ${f##*.} in *[!0-9]*) continue;; esac
	rg= rp= rs= rb= rn=
	{ read -r rg rp rs rb rn <"$f"; } 2>/dev/null
	[ -z "$rn" ] || [ "$rn" = "$n" ] || continue
	case $rg in ''|0|1|*[!0-9]*) rg=;; esac
	case $rp in ''|0|1|*[!0-9]*) rp=;; esac
	if [ -n "$rg" ] && [ -n "$rp" ] && [ "$rb" = "$b" ] && { read -r l </proc/"$rp"/stat; } 2>/dev/null; then
		cutover_pstat "$l"
		if [ "$cutover_start" = "$rs" ]; then
			if [ "$cutover_pg" = "$rg" ]; then kill -KILL -"$rg"; else kill -KILL "$rp"; fi 2>/dev/null
		fi
	fi
	rm -f "$f"
done
` + connScript

// watchdogArgs are the arguments of the sh that runs line under the
// watchdog, in mode "local", "input" or "ssh", with the connection's fence ("" for none).
func watchdogArgs(mode, line, tag, node, fence string) []string {
	return []string{"-c", wrapperScript, "cutover-cmd", line, mode, tag, node, fence}
}

// sshLine is the command line that runs line under the watchdog over SSH.
// The login shell execs sh, so that the command is sshd's own child and its
// exit status or signal reaches cutover unchanged.
func sshLine(line, tag, node, fence string) string {
	return "exec sh " + QuoteArgs(watchdogArgs("ssh", line, tag, node, fence))
}

// reapLine is the start of a command line that fences tag on node for the connection whose
// fence is fence and kills what commands of tag left running there, and, for an owner (not
// ""), ends the node's older connections of that owner; it ends with a newline, and the line
// goes on with what runs next. Only a line that the login shell of an SSH connection runs (or a
// command that shell starts) may carry an owner: the connection it records is its sshd.
func reapLine(tag, node, fence, owner string) string {
	return "t=" + Quote(tag) + " n=" + Quote(node) + " g=" + Quote(fence) + " o=" + Quote(owner) + "\n" + reapScript
}

// fenceScript writes the connection's fence $g, when not "", to the fence file of tag $t and node $n,
// atomically (a new file renamed over the old). The fence is what makes a request that
// reaches a node late harmless. A connection that cutover gave up (its keepalive failed) may
// still deliver what cutover wrote to it, once the network heals: a command shell's go, a
// command's own session. Every tagged command carries its connection's fence and runs only
// while the tag's fence file holds it; a connection's reap, which runs before its first
// command, writes its own fence there before it looks for records. A command writes its
// record before it compares the fence, so either it sees the newer fence and does not run, or
// its record was there before the reap looked, and the reap kills it. The file lives beside
// the records (root's /run/cutover/cmd, or the login's ~/.cutover/cmd), named TAG.NODE.fence
// (one host may be several nodes of an inventory); the reap's loop leaves it alone, as only
// records end in a number. A tag's fence file stays when
// its run is over (a run's later executions need it); the fence files of runs that wrote none
// for a week are removed, and so are connection records of a week ago (see connScript), in the
// same pass over the directory.
const fenceScript = `if [ -n "$g" ] && [ -n "$cutover_dir" ]; then
	[ -d "$cutover_dir" ] || mkdir -p -m 700 "$cutover_dir" 2>/dev/null
	{ printf '%s\n' "$g" >"$cutover_dir/$t.$n.fence-$$" && mv -f "$cutover_dir/$t.$n.fence-$$" "$cutover_dir/$t.$n.fence"; } 2>/dev/null
	find "$cutover_dir" -maxdepth 1 \( -name '*.fence' -o -name '.conn.*' \) -mtime +7 -exec rm -f {} + 2>/dev/null
fi
`

// connScript ends the node's older SSH connections of owner $o and records this one, for a
// connection with a fence $g, when $o is not "". A connection that cutover gave up (its
// keepalive failed) still holds what cutover wrote to it: a held packet may deliver an SFTP
// request (a rename, a write) once the network heals, after the run went on through a newer
// connection, rolled back or said that nothing changed. Tagged commands are fenced (see
// fenceScript); an SFTP request is not, so the newer connection's reap ends the older
// connection on the node's side before anything else: what reaches it later meets a closed
// connection. Each connection records its sshd (the process that serves its channels, the
// parent of its login shell, or of the watchdog's sh under it) in the record directory, as
// .conn.OWNER.FENCE holding "PID START BOOT NODE"; the reap of a connection of the same owner
// to the same node with another fence kills that process, and the SFTP server it runs, only
// when it is still the same process (same boot, same start time) and is an sshd, and removes
// the record. The owner names the master's state directory, so a master's runs end each
// other's connections (a run's and its rollback run's), and never another master's or a
// test's. Records of a week ago are removed by fenceScript's clean-up. Only an SSH connection's reap carries an owner:
// the master's own commands have no sshd to record.
const connScript = `if [ -n "$o" ] && [ -n "$g" ] && [ -n "$cutover_dir" ] && [ -d "$cutover_dir" ]; then
	cutover_ppid() { set -- ${1##*) }; cutover_pp=$2; }
	for f in "$cutover_dir/.conn.$o".*; do
		[ -f "$f" ] && ! [ -L "$f" ] && [ "${f##*.}" != "$g" ] || continue
		rp= rs= rb= rn=
		{ read -r rp rs rb rn <"$f"; } 2>/dev/null
		[ "$rn" = "$n" ] || continue
		case $rp in ''|0|1|*[!0-9]*) rp=;; esac
		if [ -n "$rp" ] && [ "$rb" = "$b" ] && { read -r l </proc/"$rp"/stat; } 2>/dev/null; then
			cutover_pstat "$l"
			c=
			{ read -r c </proc/"$rp"/comm; } 2>/dev/null
			if [ "$cutover_start" = "$rs" ]; then
				case $c in sshd|sshd-session) pkill -KILL -P "$rp" -x sftp-server 2>/dev/null; kill -KILL "$rp" 2>/dev/null;; esac
			fi
		fi
		rm -f "$f"
	done
	p=$$ i=0
	while [ $i -lt 2 ] && { read -r l </proc/"$p"/stat; } 2>/dev/null; do
		cutover_ppid "$l"
		p=$cutover_pp c=
		{ read -r c </proc/"$p"/comm; } 2>/dev/null
		case $c in sshd|sshd-session)
			{ read -r l </proc/"$p"/stat; } 2>/dev/null && cutover_pstat "$l" &&
				{ printf '%s %s %s %s\n' "$p" "$cutover_start" "$b" "$n" >"$cutover_dir/.conn.$o.$g"; } 2>/dev/null
			break;;
		esac
		i=$((i + 1))
	done
fi
`

// fencedStatus is the exit status of a command that a node did not run because its
// connection's fence is no longer the tag's (see fenceScript).
const fencedStatus = "96"

// newFence returns a connection's fence: 16 random hex digits.
func newFence() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// maxCommandTag bounds a command tag's length.
const maxCommandTag = 64

// checkCommandTag accepts "" and tags of lower-case letters, digits and
// '-': a tag becomes part of a file name and of a shell line on the nodes.
func checkCommandTag(tag string) error {
	if len(tag) > maxCommandTag {
		return fmt.Errorf("command tag %q: longer than %d characters", tag, maxCommandTag)
	}
	for _, r := range tag {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-') {
			return fmt.Errorf("command tag %q: %q is not allowed (lower-case letters, digits and '-' only)", tag, r)
		}
	}
	return nil
}

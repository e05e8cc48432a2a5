package nodes

import (
	"strconv"
	"time"
)

// A command shell is one long-lived bash on a node that runs a connection's commands one after
// another, so that a command costs the node a fork and an exec or two instead of a new SSH
// session, a login shell and the watchdog's shells. It keeps the watchdog's promises (see
// watchdog.go): each command runs in a process group of its own (bash's job control), with a
// watcher in that group that reads the shell's standard input, so that end of file there (cutover
// died, the connection dropped) or a "kill" request kills the group, and the group's number
// cannot be given to another process while the watcher could still signal it. Records of tagged
// commands are kept as the watchdog keeps them, in one file per shell that holds the running
// command (empty between commands).
//
// The protocol, over the shell's standard input:
//
//	run BOUNDARY MODE N   then N lines: the command; MODE "exec" runs an argv line in the
//	                      shell's place, "sh" runs a script with sh -c
//	go BOUNDARY           the answer to the shell's ask: cutover still waits for the command
//	done                  the command's end was read: its watcher exits
//	kill                  kill the command's process group (or, instead of go, skip it)
//
// and, on standard output before the command runs:
//
//	\nBOUNDARY ask\n      the shell has the command and runs it only on go
//
// and, on both standard output and standard error, after the command's own output:
//
//	\nBOUNDARY STATUS START\n  the command exited with STATUS (a shell's status: 128+N for signal N);
//	                         START is the start time, in clock ticks since the node's boot (field
//	                         22 of /proc/PID/stat), of the subshell the shell forked to run the
//	                         command, read before the command started (0 when unknown)
//	\nBOUNDARY end\n         the command's process group was waited for; the next request is read
//
// Each command's output is its own. Its standard output and error are not the session's but two
// FIFOs in a private directory the shell made (mktemp -d, in $TMPDIR or /tmp, else /dev/shm or the
// login's home), each read by a copier, a cat that the shell started with the FIFO's name as its
// argument 256 times: opened anew for each command, a FIFO is a pipe of the command's own, which
// the copier reads to its end and passes on to the session, the status line last, before it opens
// the FIFO again for the next command. Once cutover has read the command's status lines, or the
// command was killed, the shell looks whether a copier still holds its FIFO open (/proc/PID/fd/3:
// cat starts with 3 closed, so its FIFO is 3): then a process the command left running (a daemon
// that did not redirect its output) still holds that pipe. The shell then ends both copiers and
// starts new ones on new FIFOs, before it writes the end lines: the process left running writes
// into a pipe that nobody reads (EPIPE, SIGPIPE, as once a session of its own has ended), never
// into the session, and nothing it writes after its command ended passes for a later command's
// output (what it writes until the shell has looked, at most a tenth of a second, half a second
// after a kill, reaches cutover after the status line, where the frame drops it). A command costs
// no process more than before; the copiers are replaced only then, when one is gone, and after 256
// commands. They are the shell's only children in its process group, which is the session's own
// (sshd's setsid; a shell that is not its group's leader exits shellNoBash): the shell ends them
// with a signal to that group, which it catches itself, so no signal ever goes to a process id that
// may have passed to another process meanwhile. The shell ends them, and removes their directory,
// when it exits; a shell killed before it could leaves its directory, which the next shell of the
// login removes (the directory's name holds its shell's PID namespace, pid and start time, and only
// one whose shell is gone is removed).
//
// Everything the node sends is bounded and typed before it is used: the boot identity before
// the ready line (at most maxBoot bytes, ValidBoot, else the shell is refused), each frame's
// status word (at most maxFrameWord bytes up to its newline, "ask", "end" or STATUS [START] in
// decimal, else the frame is malformed, the command fails and the shell is closed), and the
// framer's buffer (a chunk of input and a boundary's length).
//
// The ask costs a round trip a command, and is what keeps a request that reached the node late
// from running at all: a connection cut off while cutover wrote a request leaves it in the
// master's TCP send queue, delivered when the network heals, possibly after cutover gave the
// command up, rolled back and exited. The shell then asks, reads the end of file that follows,
// and exits without running it. The go itself can be late too (the network held it after
// cutover sent it), so it is bounded twice over. In time: the shell waits for it at most the
// connection's keepalive span (its third argument, in seconds), after which cutover gives a
// silent connection up, and then exits without running the command. And by the fence (see
// fenceScript): a tagged shell runs a command only while its connection's fence is the tag's,
// which a newer connection of the run to the node replaces before anything else; the check
// runs in the command's watcher after it has written the command's record, and the command
// waits for its verdict on the shell's gate (a FIFO the shell holds open, one line "go
// BOUNDARY" or "no BOUNDARY" a command), so that either the check sees the newer fence or the
// newer connection's reap sees the record and kills the command. A fenced shell exits, with
// fencedStatus.
//
// The boundary is 16 random bytes per command, sent on standard input only, so no command can
// know it, let alone print it. A node without bash (exit 97 before the shell is ready) and a
// connection whose command is already running use a session of their own per command, as before,
// and so does a command whose shell ended before it asked to run it.

// shellReady is the boundary of the line a command shell prints when it is ready; what it
// prints before that line is the node's boot identity (Result.Boot), read as it started.
const shellReady = "cutover-shell-ready"

// maxBoot bounds what a node may send before its command shell's ready line: a boot identity
// (ValidBoot) is at most 36+1+20 bytes.
const maxBoot = 64

// maxFrameWord bounds the word of a frame's line, between its boundary and its newline: "ask",
// "end" or a status and a start time.
const maxFrameWord = 64

// shellNoBash is the exit status of a command shell's start on a node without bash, or whose
// bash has no job control, does not lead a process group of its own or cannot make its
// copiers' FIFOs; shellScript spells it out (TestShellNoBashStatus keeps them equal).
const shellNoBash = 97

// shellScript is the node's side of a command shell; its arguments are the command tag ("" for
// no records) and the node's name. It exits shellNoBash where bash has no job control, where it
// does not lead its process group (the copiers' group, see above), and where it cannot make the
// copiers' directory and FIFOs. The shell waits for a command's watcher to end; bash's wait also
// returns when it is stopped (SIGSTOP, as when the node is frozen), so it waits again for as
// long as the watcher is there and not a zombie, stopped or already continued (wait -f would do
// it, but loops for ever in bash 5.2 when the process has already been reaped; a pid given
// meanwhile to another process ends the loop, as wait then answers 127). The watcher exits 0
// when cutover read the command's end (done), and otherwise not: then the copiers have half a
// second to pass on what the command wrote before it was killed.
//
// The copiers: the shell opens a command's FIFOs for writing (7 and 8) and for reading and writing
// (9 and 3), which never waits, so that each FIFO has a reader from the start even if its copier
// has not opened it yet; the subshell that runs the command keeps 9 and 3 (the command does not)
// until it has written the status lines and sees both copiers hold their FIFOs (or one gone),
// however long a copier just started takes to open its FIFO, so that the command's output is never
// left without a reader. A copier is alive while its standard output is still the session's
// (cutover_alive: no other process has that); the shell signals the copiers it ends (USR1, and CONT
// for a stopped one) until they are no longer alive, for at most five seconds, after which the next
// copiers have new FIFOs, which one that lives on does not read. A new copier has started once it
// runs cat (its executable is no longer bash), and the shell waits for that before it goes on: a
// copier between its fork and its exec would have bash's handler catch the signal that is to end
// it. A shell that cannot start copiers ends the frame without asking, so that the command, which
// never ran, runs in a session of its own, and exits 98. cutover_nap sleeps without a process: a
// read that times out on a FIFO nothing writes to. The shell catches SIGPIPE, so that a write to a
// session cutover closed does not kill it before it ends its copiers and removes their directory
// (EXIT).
const shellScript = `set -m
case $- in *m*) ;; *) exit 97;; esac
cutover_tag=$1 cutover_node=$2 cutover_wait=$3 cutover_fence=$4
case $cutover_wait in ''|*[!0-9]*) cutover_wait=15;; esac
exec 4>&1 5<&0 6>&2 </dev/null >/dev/null 2>/dev/null
` + procStatScript + `cutover_rec= cutover_dir= cutover_boot= cutover_init= cutover_pg= cutover_tmp= cutover_co= cutover_ce= cutover_gen=0 cutover_k=0 cutover_new=new
{ read -r cutover_l </proc/$$/stat; } 2>/dev/null && cutover_pstat "$cutover_l"
[ "$cutover_pg" = $$ ] || exit 97
cutover_me=$cutover_start
{ read -r cutover_boot </proc/sys/kernel/random/boot_id; } 2>/dev/null
{ read -r cutover_l </proc/1/stat; } 2>/dev/null && cutover_pstat "$cutover_l" && cutover_init=$cutover_start
if [ -n "$cutover_tag" ]; then
	` + recordDirScript + `	if [ -n "$cutover_dir" ]; then
		[ -d "$cutover_dir" ] || mkdir -p -m 700 "$cutover_dir"
		cutover_rec=$cutover_dir/$cutover_tag.$$
		{ : >"$cutover_rec"; } 2>/dev/null || cutover_rec=
	fi
fi
trap 'kill -USR1 -$$ 2>/dev/null; rm -rf ${cutover_tmp:+"$cutover_tmp"} ${cutover_rec:+"$cutover_rec"}' EXIT
trap : USR1 PIPE
cutover_fenced() {
	[ -n "$cutover_fence" ] && [ -n "$cutover_dir" ] && { read -r cutover_x <"$cutover_dir/$cutover_tag.$cutover_node.fence"; } 2>/dev/null &&
		[ -n "$cutover_x" ] && [ "$cutover_x" != "$cutover_fence" ]
}
cutover_alive() { [ /proc/$1/fd/1 -ef /proc/$$/fd/$2 ]; }
cutover_started() { [ -e /proc/$1/exe ] || return 0; cutover_alive "$1" "$2" && ! [ /proc/$1/exe -ef /proc/$$/exe ]; }
cutover_busy() { [ /proc/$1/fd/3 -ef "$2" ]; }
cutover_spawn() {
	if [ -n "$cutover_co" ]; then
		cutover_i=0
		while cutover_alive "$cutover_co" 4 || cutover_alive "$cutover_ce" 6; do
			[ $cutover_i -lt 500 ] || { cutover_new=new; break; }
			kill -USR1 -$$ 2>/dev/null
			kill -CONT -$$ 2>/dev/null
			cutover_nap 0.01
			cutover_i=$((cutover_i + 1))
		done
		cutover_co=
	fi
	if [ -n "$cutover_new" ]; then
		cutover_gen=$((cutover_gen + 1))
		mkfifo -m 600 "$cutover_tmp/o$cutover_gen" "$cutover_tmp/e$cutover_gen" 2>/dev/null || return
	fi
	cutover_fo=$cutover_tmp/o$cutover_gen cutover_fe=$cutover_tmp/e$cutover_gen cutover_k=0 cutover_new=
	set +m
	cat "$cutover_fo"{,}{,}{,}{,}{,}{,}{,}{,} </dev/null >&4 2>/dev/null 3<&- 4>&- 5<&- 6>&- {cutover_g}<&- &
	cutover_co=$!
	cat "$cutover_fe"{,}{,}{,}{,}{,}{,}{,}{,} </dev/null >&6 2>/dev/null 3<&- 4>&- 5<&- 6>&- {cutover_g}<&- &
	cutover_ce=$!
	set -m
	cutover_i=0
	until { cutover_started "$cutover_co" 4 && cutover_started "$cutover_ce" 6; } || [ $cutover_i -ge 500 ]; do
		cutover_nap 0.01
		cutover_i=$((cutover_i + 1))
	done
}
cutover_copiers() {
	[ -n "$cutover_co" ] && [ $cutover_k -lt 256 ] && cutover_alive "$cutover_co" 4 && cutover_alive "$cutover_ce" 6 && return
	cutover_spawn && cutover_alive "$cutover_co" 4 && cutover_alive "$cutover_ce" 6
}
cutover_nap() { read -r -t "$1" cutover_l <>"$cutover_tmp/nap"; }
cutover_ns=$(readlink /proc/$$/ns/pid 2>/dev/null) cutover_ns=${cutover_ns//[!0-9]/}
cutover_tmp=$(for cutover_d in "${TMPDIR:-/tmp}" /dev/shm "$HOME"; do mktemp -d "$cutover_d/.cutover-shell-$cutover_ns-$$-$cutover_me.XXXXXXXXXX" && break; done 2>/dev/null) &&
	mkfifo -m 600 "$cutover_tmp/nap" "$cutover_tmp/gate" 2>/dev/null && exec {cutover_g}<>"$cutover_tmp/gate" || exit 97
cutover_old=()
for cutover_f in "${cutover_tmp%/*}/.cutover-shell-$cutover_ns"-*-*.*; do
	[ -d "$cutover_f" ] && [ -O "$cutover_f" ] && ! [ -L "$cutover_f" ] && [ "$cutover_f" != "$cutover_tmp" ] || continue
	cutover_l=${cutover_f##*/.cutover-shell-$cutover_ns-} cutover_l=${cutover_l%%.*}
	case $cutover_l in *-*-*|-*|*-|*[!0-9-]*) continue;; esac
	{ read -r cutover_x </proc/${cutover_l%-*}/stat; } 2>/dev/null && cutover_pstat "$cutover_x" && [ "$cutover_start" = "${cutover_l#*-}" ] && continue
	cutover_old+=("$cutover_f")
done
[ ${#cutover_old[@]} -eq 0 ] || rm -rf -- "${cutover_old[@]}" 2>/dev/null
cutover_copiers || exit 97
[ -n "$cutover_boot$cutover_init" ] && printf '%s/%s' "$cutover_boot" "$cutover_init" >&4
printf '\n%s 0\n\n%s end\n' ` + shellReady + ` ` + shellReady + ` >&4
while read -r cutover_op cutover_b cutover_mode cutover_n <&5; do
	[ "$cutover_op" = run ] || exit
	case $cutover_n in ''|*[!0-9]*) exit;; esac
	cutover_s= cutover_i=0
	while [ "$cutover_i" -lt "$cutover_n" ]; do
		IFS= read -r cutover_l <&5 || exit
		cutover_s=$cutover_s$cutover_l"
"
		cutover_i=$((cutover_i + 1))
	done
	cutover_s=${cutover_s%?}
	cutover_fenced && exit ` + fencedStatus + `
	if ! cutover_copiers; then
		printf '\n%s end\n' "$cutover_b" >&4
		printf '\n%s end\n' "$cutover_b" >&6
		exit 98
	fi
	printf '\n%s ask\n' "$cutover_b" >&4
	IFS= read -r -t "$cutover_wait" cutover_l <&5 || exit
	while read -r -t 0 -u "$cutover_g"; do read -r -u "$cutover_g" cutover_l; done
	if [ "$cutover_l" = "go $cutover_b" ] && { exec 9<>"$cutover_fo" 7>"$cutover_fo" 3<>"$cutover_fe" 8>"$cutover_fe"; } 2>/dev/null; then
		{
			cutover_start=
			{ read -r cutover_l </proc/$BASHPID/stat; } 2>/dev/null && cutover_pstat "$cutover_l"
			case $cutover_start in ''|*[!0-9]*) cutover_start=0;; esac
			cutover_x= cutover_l=
			while read -r -u "$cutover_g" cutover_x cutover_l; do [ "$cutover_l" = "$cutover_b" ] && break; done
			if [ "$cutover_x" = go ]; then
				if [ "$cutover_mode" = exec ]; then
					(eval "exec $cutover_s") 3<&- 9<&- {cutover_g}<&- </dev/null
				else
					sh -c "$cutover_s" 3<&- 9<&- {cutover_g}<&- </dev/null
				fi
				cutover_st=$?
				printf '\n%s %s %s\n' "$cutover_b" "$cutover_st" "$cutover_start"
				printf '\n%s %s %s\n' "$cutover_b" "$cutover_st" "$cutover_start" >&2
				until cutover_busy "$cutover_co" "$cutover_fo" && cutover_busy "$cutover_ce" "$cutover_fe"; do
					cutover_alive "$cutover_co" 4 && cutover_alive "$cutover_ce" 6 || break
					cutover_nap 0.01
				done
			fi
		} >&7 2>&8 4>&- 5>&- 6>&- 7>&- 8>&- | {
			trap "" TERM
			cutover_pg= cutover_start=-
			{ read -r cutover_l </proc/$BASHPID/stat; } 2>/dev/null && cutover_pstat "$cutover_l"
			[ -z "$cutover_rec" ] || { printf "%s %s %s %s %s\n" "$cutover_pg" "$BASHPID" "$cutover_start" "${cutover_boot:--}" "$cutover_node" >"$cutover_rec"; } 2>/dev/null
			if cutover_fenced; then
				printf 'no %s\n' "$cutover_b" >&"$cutover_g"
				[ -z "$cutover_rec" ] || { : >"$cutover_rec"; } 2>/dev/null
				exit 1
			fi
			printf 'go %s\n' "$cutover_b" >&"$cutover_g"
			cutover_l=
			IFS= read -r cutover_l <&5
			if [ "$cutover_l" != done ]; then
				if [ -n "$cutover_pg" ] && { read -r cutover_l </proc/"$cutover_pg"/stat; } 2>/dev/null; then
					set -- ${cutover_l##*) }
					case $1 in Z|X) ;; *) exec sh -c '` + killerScript + `' cutover-kill "$cutover_pg" "$cutover_rec";; esac
				fi
				cutover_l=
			fi
			[ -z "$cutover_rec" ] || { : >"$cutover_rec"; } 2>/dev/null
			[ "$cutover_l" = done ]
		} 3<&- 4>&- 6>&- 7>&- 8>&- 9<&- &
		cutover_w=$!
		exec 3<&- 7>&- 8>&- 9<&-
		cutover_ws=0
		while :; do
			wait "$cutover_w"
			cutover_i=$?
			[ $cutover_i -eq 127 ] && break
			cutover_ws=$cutover_i
			{ read -r cutover_l </proc/"$cutover_w"/stat; } 2>/dev/null || break
			set -- ${cutover_l##*) }
			case $1 in Z|X) break;; T|t) sleep 0.2;; esac
		done
		cutover_k=$((cutover_k + 1)) cutover_i=0
		while cutover_busy "$cutover_co" "$cutover_fo" || cutover_busy "$cutover_ce" "$cutover_fe"; do
			if [ $cutover_i -ge 10 ]; then
				cutover_new=new
				cutover_spawn
				break
			fi
			if [ "$cutover_ws" = 0 ]; then cutover_nap 0.01; else cutover_nap 0.05; fi
			cutover_i=$((cutover_i + 1))
		done
	else
		exec 3<&- 7>&- 8>&- 9<&-
	fi
	cutover_fenced && exit ` + fencedStatus + `
	printf '\n%s end\n' "$cutover_b" >&4
	printf '\n%s end\n' "$cutover_b" >&6
done
`

// shellLine is the command line that starts a command shell of the connection for tag on node
// with the program bash (a name to look up in PATH), after the reap of tag's leftovers when
// reap is set. The shell waits for a command's go at most the connection's goWait, in whole
// seconds (at least one), and runs a tagged command only while the tag's fence is the
// connection's.
func (c *sshClient) shellLine(bash, tag, node string, reap bool) string {
	line := ""
	if reap && tag != "" {
		line = reapLine(tag, node, c.fence, c.owner())
	}
	wait := max(int64((c.goWait+time.Second-1)/time.Second), 1)
	return line + "command -v " + Quote(bash) + " >/dev/null 2>&1 || exit " + strconv.Itoa(shellNoBash) + "\n" +
		"BASH_ENV= exec " + Quote(bash) + " --norc --noprofile -c " + Quote(shellScript) + " cutover-shell " +
		QuoteArgs([]string{tag, node, strconv.FormatInt(wait, 10), c.fence})
}

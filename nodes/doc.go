// Package nodes is how cutover reaches the machines of a cluster: it knows
// the node list, runs commands and file operations on each node, and fans
// work out over many nodes at once.
//
// # Inventory
//
// An [Inventory] is the validated node list, built by [NewInventory] from the
// configuration, by [ParseNodeList] from a nodes_command's output, or by
// [LoadInventory], which picks between the two. Names must be host names,
// addresses host names or IP literals and ports in range, so nothing from the
// list can smuggle options or shell syntax into a connection. One node is the
// master: the host cutover runs on.
//
// # Connections
//
// A [Pool] holds one connection per node for a whole run. The master's
// connection is local (os/exec and the os package); every other node is
// reached over SSH, dialed on first use and then reused for every command
// (one SSH session each) and every file operation (one SFTP client on the
// same connection). A [Conn] offers both behind one set of methods:
//
//	c, err := pool.Conn(ctx, "node2")
//	res, err := c.Run(ctx, "demoapp-daemons", "stop")    // arguments quoted with Quote
//	res, err = c.RunShell(ctx, "test -d /var/lib/demoapp") // a script run by sh -c
//	target, err := c.Readlink("/etc/demoapp/lib")
//
// A command that does not exit 0 returns an error that names the node, the
// command, the exit code and the tail of its standard error; [ExitCode] and
// [IsTimeout] read such errors. A Result keeps the first 4 MiB of standard
// output and the last 64 KiB of standard error; output past 4 MiB is never
// cut silently: the command's error says it passed the limit, naming the
// node, the command and the limit ([IsOutputCut]). Output that may be larger
// (the listing of a big tree) is streamed to a writer by [Conn.RunOutput].
// Every SFTP operation has the file timeout, never more than the command
// timeout, so a node whose SFTP server stops answering fails within the
// connect and command timeouts. File operations take absolute paths, and a
// missing path satisfies errors.Is(err, fs.ErrNotExist). [Conn.Rename] is a
// POSIX rename (posix-rename@openssh.com over SFTP), so renaming a new
// symlink over an old one switches it atomically; [Conn.WriteFileAtomic]
// replaces a file through a synced temporary file.
//
// # Durable before reported
//
// A file operation that changes a directory (Symlink, Rename, Remove,
// MkdirAll, WriteFileAtomic) syncs the directories it changed before it
// returns, so that a power cut of the node after it reported success cannot
// undo it: locally with fsync(2); over SFTP with the fsync@openssh.com
// extension on the directory opened read-only, or the sync command over the
// same SSH connection when the server lacks the extension; and with the sync
// command where the node has no SFTP. A sync that fails fails the operation,
// naming the directory, and a node whose storage refuses to sync is a failed
// node. [Conn.SyncDir] syncs a directory on its own.
//
// # SSH
//
// Host keys are checked strictly against the known_hosts files of
// [SSHConfig]: an unknown host or a changed key is refused ([IsUnknownHost],
// [IsHostKeyMismatch]), never trusted on first use, and the client asks only
// for the key types known_hosts holds for the host (under its address or,
// failing that, its name; [addr]:port for ports other than 22). Keys come
// from unencrypted identity files and from ssh-agent. Certificates and
// @cert-authority lines are not supported.
//
// Every connection sends keepalive@openssh.com requests; when KeepaliveMax of
// them in a row go unanswered the connection is closed, so commands on a node
// that lost power fail within seconds instead of hanging, and the next
// [Pool.Conn] call dials again. sshd counts sessions per connection
// (MaxSessions, 10 by default), so a Conn runs at most 8 commands at once and
// queues the rest.
//
// # Commands never outlive cutover
//
// Each command has a timeout (SSHConfig.CommandTimeout). A command whose
// timeout or context ends, or that runs when cutover dies, is killed with
// every process of its process group, locally and over SSH, root logins
// included (sshd refuses to signal the commands of a root login, and kills
// nothing when a client without a terminal goes away). For that, every
// command runs under a watchdog, a short sh program that cutover sends as
// the command line, so nodes need only sh and /proc. The watchdog gives the
// command an empty standard input and keeps the session's standard input,
// which cutover holds open while it waits, for a watcher. When that input
// reaches end of file while the command still runs (cutover closed it to
// stop the command, or the kernel closed it because cutover died: the pipe
// locally, the TCP connection to sshd remotely), the watcher sends SIGTERM
// to the command's process group and, a second later, SIGKILL to whatever
// is left, itself included: it stays in the group until then, so the
// group's number cannot pass to another process meanwhile. A stopped
// command's Run returns once the watcher reports the group gone; locally,
// should that take more than a few seconds, cutover kills the group itself,
// and the command's shell has SIGKILL as its parent-death signal. The
// command's shell replaces the watchdog, and a Run's program replaces that
// shell in turn, so its exit status, or the signal that killed it, reaches
// cutover unchanged.
//
// Over SSH, a connection runs its commands one after another in a command
// shell where the node has bash (for its job control without a terminal):
// one long-lived shell per connection, started with the
// connection's first command, that runs each command in a process group of
// its own with a watcher in that group reading the shell's standard input.
// It keeps the watchdog's promises (end of file or a kill request kills the
// group; the group's number stays the command's while the watcher lives;
// records of tagged commands, one file per shell, empty between commands)
// and spares the node a new SSH session, login shell and watchdog per
// command: about three quarters of the CPU a command costs in a session of
// its own. Each command's output is its own there too: the command writes into
// pipes of its own (FIFOs opened anew for each command and read by two
// long-lived copiers), and a process it leaves running with its output open
// never writes into a later command's output. Result.Start carries when the
// command started, in the node's clock ticks since boot. A command started
// while the shell is busy, every command on a node without bash, and a
// command whose shell ended before it ran, get a session of their own under
// the watchdog as above. A shell's status cannot tell a command killed by
// signal N from one that exited 128+N; its error says so.
//
// A node is an untrusted peer: what it sends the shell is bounded and typed
// before it is used. What precedes the shell's ready line must be a boot
// identity ([ValidBoot]); anything else there, more than a boot identity can
// be, or a broken frame refuses the shell, with an error that names the node
// and quotes a bounded, escaped prefix of what it sent ([Conn.Prepare]
// returns it), and the node's commands run in sessions of their own. A
// frame's line is bounded too, and a malformed one fails its command and
// closes the shell.
//
// RunInput's commands (tar -x of a staged tree, a manifest through cat) read
// cutover's stream as their standard input. Over SSH they run without the
// watchdog and end by themselves when the stream ends, which it does when
// cutover dies. Locally the watchdog runs them all the same, with its
// watcher's pipe as descriptor 3, so their process group dies with cutover.
//
// A command that ends by itself leaves its background processes running
// (daemons stay up). One that starts a background process which keeps its
// standard output or error open (a daemon that does not redirect its output)
// returns two seconds after it exits, locally and in an SSH session of its
// own, and at once in the command shell: the output is cut off there, and
// the process keeps running, but what it writes to that output later reaches
// no command's result (its writes fail: EPIPE, or SIGPIPE). Processes that
// leave the command's process group (setsid, daemons) are never killed.
//
// # Command records
//
// A node cut off from the network when cutover dies never sees the end of
// file, so its command may run on. So that a resumed run never races such a
// command, [Pool.SetCommandTag] names the run the pool works for (such as
// "run-7"). While a command of a tagged pool runs, its node holds a record
// of it: a file named TAG.PID in /run/cutover/cmd (mode 0700) for root, in
// ~/.cutover/cmd for other logins (and for root when /run is missing),
// holding the command's process group, pid, start time, boot id and node
// name. The watcher removes it when the command ends or is killed; for a
// command of the master that ends by itself, cutover does. Before a
// connection of a tagged pool is first handed out by [Pool.Conn] or first
// runs a command (in a new pool, or dialed again after the last connection
// was lost), every command recorded on the node under the same tag and node
// name whose process still runs (same boot, same start time) is killed with
// its process group, and every record of the tag for the node is removed.
// Records of other tags are left alone.
//
// # Fan-out
//
// [Each] runs a function for a list of nodes with bounded parallelism,
// optionally running one node (the master) after all others, and returns one
// [Outcome] per node in list order together with the joined errors.
//
// Tests reach real sshd processes started by package
// [github.com/cutover/cutover/nodes/sshdtest].
package nodes

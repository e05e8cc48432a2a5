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
// [IsTimeout] read such errors. File operations take absolute paths, and a
// missing path satisfies errors.Is(err, fs.ErrNotExist). [Conn.Rename] is a
// POSIX rename (posix-rename@openssh.com over SFTP), so renaming a new
// symlink over an old one switches it atomically; [Conn.WriteFileAtomic]
// replaces a file through a synced temporary file.
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
// [Pool.Conn] call dials again. Each command has a timeout, after which its
// session is killed. sshd counts sessions per connection (MaxSessions, 10 by
// default), so a Conn runs at most 8 commands at once and queues the rest.
//
// A command that starts a background process which keeps its standard
// output or error open (a daemon that does not redirect its output) returns
// two seconds after it exits, locally and over SSH alike: the output is cut
// off there and the process keeps running.
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

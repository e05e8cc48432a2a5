package nodes_test

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/cutover/cutover/nodes"
)

var errSyncRefused = errors.New("sync refused by the test")

// syncRecorder sees every directory sync of the file operations, as "HOW DIR"
// where HOW is local, sftp or command: local and SFTP syncs through the
// package's hooks, command syncs through a sync command that logs the
// directories on the node before it syncs them. A sync of fail fails.
type syncRecorder struct {
	log string // where the sync command logs, on this machine as on the nodes

	mu     sync.Mutex
	fail   string
	synced []string
}

// syncCommandScript logs its directories ($3...) to $1, fails naming the one
// equal to $2, and syncs them otherwise.
const syncCommandScript = `log=$1 fail=$2; shift 2
for d; do printf 'command %s\n' "$d" >>"$log"; done
for d; do
	if [ "$d" = "$fail" ]; then echo "sync: error syncing '$d': Input/output error" >&2; exit 1; fi
done
exec sync -- "$@"`

// recordSyncs installs a syncRecorder until t ends; log must be writable by
// the nodes' login.
func recordSyncs(t *testing.T, log string) *syncRecorder {
	t.Helper()
	r := &syncRecorder{log: log}
	hook := func(how string) func(dir string, sync func() error) error {
		return func(dir string, sync func() error) error {
			r.mu.Lock()
			r.synced = append(r.synced, how+" "+dir)
			fail := dir == r.fail
			r.mu.Unlock()
			if fail {
				return errSyncRefused
			}
			return sync()
		}
	}
	nodes.SetLocalDirSync(t, hook("local"))
	nodes.SetSFTPDirSync(t, hook("sftp"))
	return r
}

// start forgets what was recorded and makes a sync of fail fail from now on.
func (r *syncRecorder) start(t *testing.T, fail string) {
	t.Helper()
	r.mu.Lock()
	r.fail, r.synced = fail, nil
	r.mu.Unlock()
	if err := os.WriteFile(r.log, nil, 0o666); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(r.log, 0o666); err != nil {
		t.Fatal(err)
	}
	nodes.SetSyncCommand(t, "sh", "-c", syncCommandScript, "cutover-sync", r.log, fail)
}

// got returns the syncs since start, those by command last.
func (r *syncRecorder) got(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(r.log)
	if err != nil {
		t.Fatal(err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	got := slices.Clone(r.synced)
	for _, line := range strings.Split(string(data), "\n") {
		if line != "" {
			got = append(got, line)
		}
	}
	return got
}

// TestFileOperationsSync checks, on every transport, that each file
// operation that changes a directory syncs exactly the directories it
// changed, and that a sync that fails fails the operation, naming it and the
// directory. It does not run in parallel: it changes how the whole package
// syncs.
func TestFileOperationsSync(t *testing.T) {
	targets, cluster := fsTargets(t)
	rec := recordSyncs(t, filepath.Join(cluster.UserDir(t), "synced"))
	ops := []struct {
		name string
		op   func(c *nodes.Conn, d string) error
		want []string // directories synced, relative to the test's directory
	}{
		{"symlink", func(c *nodes.Conn, d string) error { return c.Symlink("target", d+"/a/link") }, []string{"a"}},
		{"rename", func(c *nodes.Conn, d string) error { return c.Rename(d+"/a/f", d+"/a/g") }, []string{"a"}},
		{"rename", func(c *nodes.Conn, d string) error { return c.Rename(d+"/a/f", d+"/b/f") }, []string{"b", "a"}},
		{"remove", func(c *nodes.Conn, d string) error { return c.Remove(d + "/a/f") }, []string{"a"}},
		{"mkdir", func(c *nodes.Conn, d string) error { return c.MkdirAll(d+"/b/x/y", 0o750) }, []string{"b/x/y", "b/x", "b"}},
		{"mkdir", func(c *nodes.Conn, d string) error { return c.MkdirAll(d+"/b", 0o750) }, nil},
		{"write", func(c *nodes.Conn, d string) error { return c.WriteFileAtomic(d+"/a/f", []byte("x"), 0o640) }, []string{"a"}},
		{"sync directory", func(c *nodes.Conn, d string) error { return c.SyncDir(d + "/b") }, []string{"b"}},
	}
	type target struct {
		name      string
		conn      *nodes.Conn
		how       string // how the target syncs
		hideFsync bool   // its SFTP server is taken for one without fsync@openssh.com
	}
	var all []target
	for _, ft := range targets {
		how := map[string]string{"local": "local", "ssh": "sftp", "ssh-without-sftp": "command"}[ft.name]
		all = append(all, target{ft.name, ft.conn, how, false})
		if ft.name == "ssh" {
			all = append(all, target{"ssh-sftp-without-fsync", ft.conn, "command", true})
		}
	}
	for _, tg := range all {
		for i, op := range ops {
			for _, failing := range []bool{false, true} {
				if failing && op.want == nil {
					continue
				}
				name := tg.name + "/" + op.name + "/" + strings.Join(op.want, ",")
				if failing {
					name += "/failing"
				}
				t.Run(name, func(t *testing.T) {
					if tg.hideFsync {
						nodes.HideSFTPFsync(t)
					}
					dir := cluster.UserDir(t)
					if tg.how == "local" {
						dir = t.TempDir()
					}
					// The fixture belongs to the login, as the operations' results do.
					for _, err := range []error{
						tg.conn.MkdirAll(filepath.Join(dir, "a"), 0o755),
						tg.conn.MkdirAll(filepath.Join(dir, "b"), 0o755),
						tg.conn.WriteFileAtomic(filepath.Join(dir, "a", "f"), nil, 0o644),
					} {
						if err != nil {
							t.Fatal(err)
						}
					}
					var want []string
					for _, w := range op.want {
						want = append(want, tg.how+" "+filepath.Join(dir, w))
					}
					fail := ""
					if failing {
						fail = filepath.Join(dir, op.want[len(op.want)-1])
					}
					rec.start(t, fail)
					err := op.op(tg.conn, dir)
					if got := rec.got(t); !slices.Equal(got, want) {
						t.Errorf("op %d synced %q, want %q", i, got, want)
					}
					if !failing {
						if err != nil {
							t.Errorf("op %d: %v", i, err)
						}
						return
					}
					if err == nil {
						t.Fatalf("op %d succeeded although the sync of %s failed", i, fail)
					}
					msg := err.Error()
					if !strings.HasPrefix(msg, tg.conn.Node()+": "+op.name+" ") || !strings.Contains(msg, "sync directory") || !strings.Contains(msg, fail) {
						t.Errorf("op %d: error %q does not name the node, the operation and the directory %s", i, msg, fail)
					}
					if tg.how == "command" && !strings.Contains(msg, "Input/output error") {
						t.Errorf("op %d: error %q does not say why the sync failed", i, msg)
					}
					if tg.how != "command" && !errors.Is(err, errSyncRefused) {
						t.Errorf("op %d: error %v does not wrap the sync's failure", i, err)
					}
				})
			}
		}
	}
}

package nodes_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cutover/cutover/nodes"
	"github.com/cutover/cutover/nodes/sshdtest"
)

// TestWriteFileAtomicNeverReadable checks that what WriteFileAtomic writes
// is never readable by others while it is written: the SFTP server creates
// files with its own umask, so a temporary file must not be reachable by
// others before its mode is set. A watcher looks at the directory all the
// time that large writes of a 0600 file take.
func TestWriteFileAtomicNeverReadable(t *testing.T) {
	t.Parallel()
	targets, cluster := fsTargets(t)
	data := []byte(strings.Repeat("secret\n", 8<<20/7))
	for _, ft := range targets {
		t.Run(ft.name, func(t *testing.T) {
			t.Parallel()
			dir := ft.newDir(t, cluster)
			if err := os.Chmod(dir, 0o755); err != nil {
				t.Fatal(err)
			}
			file := filepath.Join(dir, "secret.conf")
			stop := make(chan struct{})
			var seen []string
			var looks int
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					looks++
					seen = append(seen, readableByOthers(dir, "secret.conf")...)
				}
			}()
			for i := 0; i < 3; i++ {
				if err := ft.conn.WriteFileAtomic(file, data, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			close(stop)
			wg.Wait()
			if len(seen) > 0 {
				t.Fatalf("while the file was written, others could read: %s", strings.Join(dedupe(seen), "; "))
			}
			assertFile(t, file, string(data), 0o600)
			if entries, _ := os.ReadDir(dir); len(entries) != 1 {
				t.Errorf("the directory holds %d entries after the writes, want only the file", len(entries))
			}
			t.Logf("%d looks at the directory during the writes", looks)
		})
	}
}

// readableByOthers lists what in dir, other than final, holds data that
// others could read: a file others may read, in a directory they may search.
func readableByOthers(dir, final string) []string {
	var out []string
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if e.Name() == final {
			continue
		}
		p := filepath.Join(dir, e.Name())
		fi, err := os.Lstat(p)
		if err != nil {
			continue
		}
		switch {
		case fi.Mode().IsRegular() && fi.Mode().Perm()&0o004 != 0:
			out = append(out, fmt.Sprintf("%s (%v)", e.Name(), fi.Mode().Perm()))
		case fi.IsDir() && fi.Mode().Perm()&0o001 != 0:
			inner, _ := os.ReadDir(p)
			var readable []string
			for _, ie := range inner {
				if ii, err := ie.Info(); err == nil && ii.Mode().Perm()&0o004 != 0 {
					readable = append(readable, fmt.Sprintf("%s/%s (%v", e.Name(), ie.Name(), ii.Mode().Perm()))
				}
			}
			// The directory's mode is read again after its files: a write closes its
			// temporary directory (0700) before it creates the file, and never opens it
			// again, so a directory others may still search now could be searched while
			// the file was there. The first look alone may predate the chmod.
			if len(readable) == 0 {
				continue
			}
			if after, err := os.Lstat(p); err == nil && after.Mode().Perm()&0o001 != 0 {
				for _, r := range readable {
					out = append(out, fmt.Sprintf("%s, directory %v)", r, after.Mode().Perm()))
				}
			}
		}
	}
	return out
}

func dedupe(list []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range list {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

// TestSFTPServerThatHangs checks that an SFTP server that never answers
// fails the operation after the file timeout instead of hanging cutover,
// that later operations on the connection fail at once, and that commands
// still run.
func TestSFTPServerThatHangs(t *testing.T) {
	t.Parallel()
	// It reads requests and never answers; it ends when the connection does.
	c := sshdtest.Start(t, 1, sshdtest.WithSFTPServer("cat >/dev/null"))
	const timeout = 500 * time.Millisecond
	p := newPool(t, c, func(cfg *nodes.SSHConfig) { cfg.FileTimeout = timeout })
	n := conn(t, p, "node1")

	done := make(chan error, 1)
	go func() {
		_, err := n.Lstat("/")
		done <- err
	}()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "did not answer within 500ms") {
			t.Fatalf("Lstat on a hung SFTP server = %v; want an error saying it did not answer", err)
		}
		var pe *fs.PathError
		if !errors.As(err, &pe) || pe.Op != "lstat" || pe.Path != "/" {
			t.Errorf("error %v does not name the operation and the path", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Lstat on a hung SFTP server did not return within 30s")
	}

	start := time.Now()
	if _, err := n.ReadFile("/etc/hostname"); err == nil || !strings.Contains(err.Error(), "did not answer") {
		t.Errorf("a later ReadFile = %v; want the earlier failure", err)
	}
	if took := time.Since(start); took >= timeout {
		t.Errorf("a later operation took %s: it waited for the hung server again", took)
	}
	res, err := n.Run(context.Background(), "echo", "still here")
	if err != nil || strings.TrimSpace(string(res.Stdout)) != "still here" {
		t.Errorf("a command after the SFTP failure = %q, %v; want it to run", res.Stdout, err)
	}
}

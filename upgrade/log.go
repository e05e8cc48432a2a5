package upgrade

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/cutover/cutover/nodes"
)

// runLog is the per-run log file under state_dir/log: every stage transition, every remote
// command with its exit code and output. A nil *runLog logs nothing.
type runLog struct {
	mu   sync.Mutex
	f    *os.File
	path string
}

func openRunLog(stateDir string, id uint64) (*runLog, error) {
	dir := filepath.Join(stateDir, "log")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("create log directory: %w", err)
	}
	path := filepath.Join(dir, fmt.Sprintf("run-%d.log", id))
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open run log: %w", err)
	}
	return &runLog{f: f, path: path}, nil
}

// Path is the log file's path, or "" for no log.
func (l *runLog) Path() string {
	if l == nil {
		return ""
	}
	return l.path
}

// Printf writes one time-stamped line, its control characters escaped (EscapeControls): a
// node's output or a path a user chose never writes raw terminal escapes into the log.
func (l *runLog) Printf(format string, args ...any) {
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.f, "%s %s\n", time.Now().UTC().Format("2006-01-02T15:04:05.000Z"), EscapeControls(fmt.Sprintf(format, args...)))
}

// Command writes a remote command, its exit code and its output.
func (l *runLog) Command(node, script string, res nodes.Result, err error) {
	if l == nil {
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s: $ %s\n", node, script)
	fmt.Fprintf(&b, "  exit %d in %s", res.ExitCode, res.Duration.Round(time.Millisecond))
	if err != nil {
		fmt.Fprintf(&b, " (%v)", err)
	}
	for _, o := range []struct {
		name string
		data []byte
	}{{"stdout", res.Stdout}, {"stderr", res.Stderr}} {
		if s := strings.TrimRight(string(o.data), "\n"); s != "" {
			fmt.Fprintf(&b, "\n  %s:\n    %s", o.name, strings.ReplaceAll(s, "\n", "\n    "))
		}
	}
	l.Printf("%s", b.String())
}

// Close closes the file.
func (l *runLog) Close() error {
	if l == nil {
		return nil
	}
	return l.f.Close()
}

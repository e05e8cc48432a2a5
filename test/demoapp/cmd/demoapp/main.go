package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

// defaultPort is the TCP port every daemon listens on.
const defaultPort = 7070

// env is what one invocation of demoapp works with: where its files are, who it is, where
// its output goes.
type env struct {
	root    string // prefix of every absolute path ("" on a real node)
	node    string // this node's name
	port    int    // the daemons' TCP port
	addr    string // the address this node's daemon listens on ("" = all)
	version string // this binary's version
	stdout  io.Writer
	stderr  io.Writer
}

// path returns the real location of the absolute path p.
func (e *env) path(p string) string {
	if e.root == "" {
		return p
	}
	return filepath.Join(e.root, p)
}

// command is one demoapp command: its words ("queue drain") and what it does.
type command struct {
	words string
	run   func(e *env, args []string) error
}

// commands lists every command; their fault names are the words joined by '-'.
var commands = []command{
	{"daemon start", daemonStart},
	{"daemon stop", daemonStop},
	{"daemon status", daemonStatus},
	{"serve", serve},
	{"job submit", jobSubmit},
	{"job list", jobList},
	{"queue drain", queueDrain},
	{"queue undrain", queueUndrain},
	{"queue drained", queueDrained},
	{"queue busy", queueBusy},
	{"watcher pause", watcherPause},
	{"watcher continue", watcherContinue},
	{"watcher paused", watcherPaused},
	{"ensure-dirs", ensureDirs},
	{"post-upgrade", postUpgrade},
	{"verify", verify},
	{"node drain", nodeDrain},
	{"node undrain", nodeUndrain},
	{"node verify", nodeVerify},
	{"load", load},
}

// exitError carries an exit code and an optional message to main.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

// usageError reports bad usage (exit 2).
func usageError(format string, args ...any) error {
	return &exitError{code: 2, msg: fmt.Sprintf(format, args...)}
}

// silentExit ends the program with code and no message (a predicate's "no").
func silentExit(code int) error { return &exitError{code: code} }

func main() {
	e, err := newEnv()
	if err == nil {
		err = run(e, os.Args[1:])
	}
	os.Exit(report(os.Stderr, err))
}

// newEnv reads the process environment.
func newEnv() (*env, error) {
	e := &env{
		root:    os.Getenv("DEMOAPP_ROOT"),
		addr:    os.Getenv("DEMOAPP_ADDR"),
		node:    os.Getenv("DEMOAPP_NODE"),
		port:    defaultPort,
		version: version,
		stdout:  os.Stdout,
		stderr:  os.Stderr,
	}
	if e.root != "" && !filepath.IsAbs(e.root) {
		return nil, usageError("DEMOAPP_ROOT %q is not an absolute path", e.root)
	}
	if p := os.Getenv("DEMOAPP_PORT"); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return nil, usageError("DEMOAPP_PORT %q is not a TCP port", p)
		}
		e.port = n
	}
	if e.node == "" {
		h, err := os.Hostname()
		if err != nil {
			return nil, fmt.Errorf("read host name: %w", err)
		}
		e.node, _, _ = strings.Cut(h, ".")
	}
	return e, nil
}

// run finds the command named by args and runs it, faults on demand first.
func run(e *env, args []string) error {
	if len(args) == 1 && (args[0] == "--version" || args[0] == "-version") {
		fmt.Fprintln(e.stdout, e.version)
		return nil
	}
	for _, c := range commands {
		words := strings.Fields(c.words)
		if len(args) < len(words) || strings.Join(args[:len(words)], " ") != c.words {
			continue
		}
		if c.words != "serve" {
			if err := fault(e, strings.Join(words, "-")); err != nil {
				return err
			}
		}
		return c.run(e, args[len(words):])
	}
	return usageError("unknown command %q; commands: %s, --version", strings.Join(args, " "), commandList())
}

// commandList names every public command.
func commandList() string {
	var names []string
	for _, c := range commands {
		if c.words != "serve" {
			names = append(names, c.words)
		}
	}
	return strings.Join(names, ", ")
}

// noArgs refuses arguments to a command that takes none.
func noArgs(name string, args []string) error {
	if len(args) > 0 {
		return usageError("%s takes no arguments, got %q", name, strings.Join(args, " "))
	}
	return nil
}

// report prints err as one line and returns the exit code.
func report(w io.Writer, err error) int {
	if err == nil {
		return 0
	}
	code := 1
	msg := err.Error()
	var ee *exitError
	if errors.As(err, &ee) {
		code = ee.code
	}
	if msg != "" {
		fmt.Fprintln(w, "demoapp: "+strings.ReplaceAll(msg, "\n", "; "))
	}
	return code
}

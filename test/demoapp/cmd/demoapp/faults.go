package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// Faults on demand let tests stop or break any command on any node. A command named N
// (its words joined by '-', e.g. "daemon-stop") first appends a line to /run/demoapp/reached/N,
// then waits while /run/demoapp/hold/N exists, then fails if /run/demoapp/fail/N exists.
const (
	reachedDir = "/run/demoapp/reached"
	holdDir    = "/run/demoapp/hold"
	failDir    = "/run/demoapp/fail"
	holdPoll   = 100 * time.Millisecond
)

// fault applies the faults on demand for the command name.
func fault(e *env, name string) error {
	dir := e.path(reachedDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("record %s reached: %w", name, err)
	}
	f, err := os.OpenFile(filepath.Join(dir, name), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("record %s reached: %w", name, err)
	}
	_, err = fmt.Fprintf(f, "%d %s\n", os.Getpid(), time.Now().UTC().Format(time.RFC3339Nano))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("record %s reached: %w", name, err)
	}
	for exists(filepath.Join(e.path(holdDir), name)) {
		time.Sleep(holdPoll)
	}
	if exists(filepath.Join(e.path(failDir), name)) {
		return fmt.Errorf("%s failed on demand", name)
	}
	return nil
}

// exists reports whether something is at path (a broken link counts).
func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil || !errors.Is(err, fs.ErrNotExist)
}

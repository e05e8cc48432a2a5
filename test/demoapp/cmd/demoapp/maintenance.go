package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// The node's state outside the queue.
const (
	stateDir       = "/var/lib/demoapp"
	pausedFlag     = "/var/lib/demoapp/watcher.paused" // exists while the watcher is paused
	postUpgradeLog = "/var/lib/demoapp/post-upgrade.log"
)

// stateDirs are the directories ensure-dirs creates, with their modes, parents first.
var stateDirs = []struct {
	path string
	mode os.FileMode
}{
	{stateDir, 0o755},
	{queueDir, 0o700},
	{queueDir + "/" + waiting, 0o700},
	{queueDir + "/" + running, 0o700},
	{queueDir + "/" + done, 0o700},
	{logDir, 0o750},
	{runDir, 0o755},
}

// ensureDirs creates the state directories and sets their modes and the config's.
func ensureDirs(e *env, args []string) error {
	if err := noArgs("ensure-dirs", args); err != nil {
		return err
	}
	for _, d := range stateDirs {
		p := e.path(d.path)
		if err := os.MkdirAll(p, d.mode); err != nil {
			return fmt.Errorf("ensure-dirs: %w", err)
		}
		if err := os.Chmod(p, d.mode); err != nil {
			return fmt.Errorf("ensure-dirs: %w", err)
		}
	}
	if err := os.Chmod(e.path(configFile), 0o600); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("ensure-dirs: %w", err)
	}
	return nil
}

// watcherPause pauses the watcher (the cluster's reconciler).
func watcherPause(e *env, args []string) error {
	if err := noArgs("watcher pause", args); err != nil {
		return err
	}
	if err := os.MkdirAll(e.path(stateDir), 0o755); err != nil {
		return fmt.Errorf("pause watcher: %w", err)
	}
	if err := os.WriteFile(e.path(pausedFlag), nil, 0o644); err != nil {
		return fmt.Errorf("pause watcher: %w", err)
	}
	return nil
}

// watcherContinue lets the watcher run again.
func watcherContinue(e *env, args []string) error {
	if err := noArgs("watcher continue", args); err != nil {
		return err
	}
	if err := os.Remove(e.path(pausedFlag)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("continue watcher: %w", err)
	}
	return nil
}

// watcherPaused prints whether the watcher is paused and exits 1 if it is not.
func watcherPaused(e *env, args []string) error {
	if err := noArgs("watcher paused", args); err != nil {
		return err
	}
	if exists(e.path(pausedFlag)) {
		fmt.Fprintln(e.stdout, "paused")
		return nil
	}
	fmt.Fprintln(e.stdout, "not paused")
	return silentExit(1)
}

// postUpgrade records that the cluster was upgraded from --from to this version.
func postUpgrade(e *env, args []string) error {
	flags := flag.NewFlagSet("post-upgrade", flag.ContinueOnError)
	flags.SetOutput(io.Discard)
	from := flags.String("from", "", "the version the cluster ran before")
	if err := flags.Parse(args); err != nil {
		return usageError("post-upgrade: %v", err)
	}
	if flags.NArg() > 0 || *from == "" {
		return usageError("usage: demoapp post-upgrade --from VERSION")
	}
	if _, err := minorOf(*from); err != nil {
		return usageError("post-upgrade: %v", err)
	}
	if err := os.MkdirAll(e.path(stateDir), 0o755); err != nil {
		return fmt.Errorf("post-upgrade: %w", err)
	}
	f, err := os.OpenFile(e.path(postUpgradeLog), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("post-upgrade: %w", err)
	}
	_, err = fmt.Fprintf(f, "from %s to %s\n", *from, e.version)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("post-upgrade: write %s: %w", postUpgradeLog, err)
	}
	return nil
}

package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"
)

// The job queue lives on the master: one JSON file per job, in the directory of its state.
// A job moves waiting -> running -> done by rename, under the queue lock.
const (
	queueDir    = "/var/lib/demoapp/queue"
	queueLock   = "/var/lib/demoapp/queue/lock"
	queueSerial = "/var/lib/demoapp/queue/serial"  // the last job id handed out
	drainedFlag = "/var/lib/demoapp/queue/drained" // exists while the queue is drained
	queuePoll   = 100 * time.Millisecond
)

// The states of a job, each a directory under queueDir.
const (
	waiting = "waiting"
	running = "running"
	done    = "done"
)

var jobStates = []string{waiting, running, done}

// job is one queued job: it takes Seconds to run.
type job struct {
	ID        int    `json:"id"`
	Seconds   int    `json:"seconds"`
	Submitted string `json:"submitted"`
}

// jobSubmit queues a job of --seconds N and prints its id.
func jobSubmit(e *env, args []string) error {
	flags := flag.NewFlagSet("job submit", flag.ContinueOnError)
	flags.SetOutput(io.Discard)
	seconds := flags.Int("seconds", -1, "how long the job runs")
	if err := flags.Parse(args); err != nil {
		return usageError("job submit: %v", err)
	}
	if flags.NArg() > 0 || *seconds < 0 || *seconds > 86400 {
		return usageError("usage: demoapp job submit --seconds N (0 to 86400)")
	}
	if err := requireMaster(e, "job submit"); err != nil {
		return err
	}
	cfg, err := loadConfig(e)
	if err != nil {
		return err
	}
	unlock, err := lockQueue(e)
	if err != nil {
		return err
	}
	defer unlock()
	if exists(e.path(drainedFlag)) {
		return errors.New("queue is drained: no new jobs are accepted")
	}
	if cfg.maxJobs > 0 {
		busy, err := countBusy(e)
		if err != nil {
			return err
		}
		if busy >= cfg.maxJobs {
			return fmt.Errorf("queue is full: %d jobs waiting or running, max_jobs is %d", busy, cfg.maxJobs)
		}
	}
	id, err := nextID(e)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(e.path(queueDir), waiting), 0o700); err != nil {
		return fmt.Errorf("submit job: %w", err)
	}
	j := job{ID: id, Seconds: *seconds, Submitted: time.Now().UTC().Format(time.RFC3339)}
	data, err := json.Marshal(j)
	if err != nil {
		return fmt.Errorf("submit job: %w", err)
	}
	if err := writeAtomic(jobPath(e, waiting, id), append(data, '\n'), 0o600); err != nil {
		return fmt.Errorf("submit job: %w", err)
	}
	fmt.Fprintln(e.stdout, id)
	return nil
}

// jobList prints "ID STATE" for every job, oldest first.
func jobList(e *env, args []string) error {
	if err := noArgs("job list", args); err != nil {
		return err
	}
	if err := requireMaster(e, "job list"); err != nil {
		return err
	}
	unlock, err := lockQueue(e)
	if err != nil {
		return err
	}
	defer unlock()
	type entry struct {
		id    int
		state string
	}
	var all []entry
	for _, state := range jobStates {
		ids, err := jobIDs(e, state)
		if err != nil {
			return err
		}
		for _, id := range ids {
			all = append(all, entry{id, state})
		}
	}
	sort.Slice(all, func(i, j int) bool { return all[i].id < all[j].id })
	for _, j := range all {
		fmt.Fprintln(e.stdout, j.id, j.state)
	}
	return nil
}

// queueDrain stops the queue from accepting jobs; queued jobs still run.
func queueDrain(e *env, args []string) error {
	if err := noArgs("queue drain", args); err != nil {
		return err
	}
	if err := requireMaster(e, "queue drain"); err != nil {
		return err
	}
	if err := os.MkdirAll(e.path(queueDir), 0o700); err != nil {
		return fmt.Errorf("drain queue: %w", err)
	}
	if err := os.WriteFile(e.path(drainedFlag), nil, 0o644); err != nil {
		return fmt.Errorf("drain queue: %w", err)
	}
	return nil
}

// queueUndrain lets the queue accept jobs again.
func queueUndrain(e *env, args []string) error {
	if err := noArgs("queue undrain", args); err != nil {
		return err
	}
	if err := requireMaster(e, "queue undrain"); err != nil {
		return err
	}
	if err := os.Remove(e.path(drainedFlag)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("undrain queue: %w", err)
	}
	return nil
}

// queueDrained prints whether the queue is drained and exits 1 if it is not.
func queueDrained(e *env, args []string) error {
	if err := noArgs("queue drained", args); err != nil {
		return err
	}
	if err := requireMaster(e, "queue drained"); err != nil {
		return err
	}
	if exists(e.path(drainedFlag)) {
		fmt.Fprintln(e.stdout, "drained")
		return nil
	}
	fmt.Fprintln(e.stdout, "not drained")
	return silentExit(1)
}

// queueBusy prints the number of waiting and running jobs.
func queueBusy(e *env, args []string) error {
	if err := noArgs("queue busy", args); err != nil {
		return err
	}
	if err := requireMaster(e, "queue busy"); err != nil {
		return err
	}
	unlock, err := lockQueue(e)
	if err != nil {
		return err
	}
	defer unlock()
	n, err := countBusy(e)
	if err != nil {
		return err
	}
	fmt.Fprintln(e.stdout, n)
	return nil
}

// runQueue runs waiting jobs one at a time until ctx ends. A job interrupted by ctx stays
// in running/; requeueInterrupted puts it back at the next start.
func runQueue(ctx context.Context, e *env, logger *log.Logger) {
	for {
		j, err := claimNext(e)
		if err != nil {
			logger.Printf("queue: %v", err)
		}
		if j == nil {
			select {
			case <-ctx.Done():
				return
			case <-time.After(queuePoll):
				continue
			}
		}
		logger.Printf("queue: job %d running for %ds", j.ID, j.Seconds)
		select {
		case <-ctx.Done():
			logger.Printf("queue: job %d interrupted, left in %s/", j.ID, running)
			return
		case <-time.After(time.Duration(j.Seconds) * time.Second):
		}
		if err := finishJob(e, j.ID); err != nil {
			logger.Printf("queue: %v", err)
			continue
		}
		logger.Printf("queue: job %d done", j.ID)
	}
}

// claimNext moves the oldest waiting job to running/ and returns it (nil if none waits).
func claimNext(e *env) (*job, error) {
	unlock, err := lockQueue(e)
	if err != nil {
		return nil, err
	}
	defer unlock()
	ids, err := jobIDs(e, waiting)
	if err != nil || len(ids) == 0 {
		return nil, err
	}
	id := ids[0]
	data, err := os.ReadFile(jobPath(e, waiting, id))
	if err != nil {
		return nil, fmt.Errorf("read job %d: %w", id, err)
	}
	var j job
	if err := json.Unmarshal(data, &j); err != nil {
		return nil, fmt.Errorf("read job %d: %w", id, err)
	}
	if err := moveJob(e, id, waiting, running); err != nil {
		return nil, err
	}
	return &j, nil
}

// finishJob moves job id from running/ to done/.
func finishJob(e *env, id int) error {
	unlock, err := lockQueue(e)
	if err != nil {
		return err
	}
	defer unlock()
	return moveJob(e, id, running, done)
}

// requeueInterrupted puts the jobs left in running/ by a stopped or crashed daemon back
// in waiting/, so that no job is ever lost.
func requeueInterrupted(e *env, logger *log.Logger) error {
	unlock, err := lockQueue(e)
	if err != nil {
		return err
	}
	defer unlock()
	ids, err := jobIDs(e, running)
	if err != nil {
		return err
	}
	var errs []error
	for _, id := range ids {
		if err := moveJob(e, id, running, waiting); err != nil {
			errs = append(errs, err)
			continue
		}
		logger.Printf("queue: interrupted job %d back in %s/", id, waiting)
	}
	return errors.Join(errs...)
}

// moveJob moves job id from one state to another.
func moveJob(e *env, id int, from, to string) error {
	if err := os.MkdirAll(filepath.Join(e.path(queueDir), to), 0o700); err != nil {
		return fmt.Errorf("move job %d to %s: %w", id, to, err)
	}
	if err := os.Rename(jobPath(e, from, id), jobPath(e, to, id)); err != nil {
		return fmt.Errorf("move job %d to %s: %w", id, to, err)
	}
	return nil
}

// countBusy returns the number of waiting and running jobs.
func countBusy(e *env) (int, error) {
	n := 0
	for _, state := range []string{waiting, running} {
		ids, err := jobIDs(e, state)
		if err != nil {
			return 0, err
		}
		n += len(ids)
	}
	return n, nil
}

// jobIDs lists the jobs in one state, oldest first; a missing directory holds none.
func jobIDs(e *env, state string) ([]int, error) {
	entries, err := os.ReadDir(filepath.Join(e.path(queueDir), state))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list %s jobs: %w", state, err)
	}
	var ids []int
	for _, ent := range entries {
		name, ok := strings.CutSuffix(ent.Name(), ".json")
		if !ok {
			continue
		}
		if id, err := strconv.Atoi(name); err == nil {
			ids = append(ids, id)
		}
	}
	sort.Ints(ids)
	return ids, nil
}

func jobPath(e *env, state string, id int) string {
	return filepath.Join(e.path(queueDir), state, strconv.Itoa(id)+".json")
}

// nextID hands out the next job id; the caller holds the queue lock.
func nextID(e *env) (int, error) {
	last := 0
	data, err := os.ReadFile(e.path(queueSerial))
	switch {
	case err == nil:
		last, err = strconv.Atoi(strings.TrimSpace(string(data)))
		if err != nil {
			return 0, fmt.Errorf("read %s: %w", queueSerial, err)
		}
	case !errors.Is(err, fs.ErrNotExist):
		return 0, fmt.Errorf("read %s: %w", queueSerial, err)
	}
	id := last + 1
	if err := writeAtomic(e.path(queueSerial), []byte(strconv.Itoa(id)+"\n"), 0o600); err != nil {
		return 0, err
	}
	return id, nil
}

// lockQueue takes the queue lock.
func lockQueue(e *env) (unlock func(), err error) {
	if err := os.MkdirAll(e.path(queueDir), 0o700); err != nil {
		return nil, fmt.Errorf("lock queue: %w", err)
	}
	return flock(e.path(queueLock))
}

package upgradetest

import (
	"sync"
	"time"
)

// Clock is a fake clock for a World's runs: it stands still but for the commands and file
// changes of the World's nodes, each of which moves it on by the time it takes (Takes), so a
// run with one node at a time (ssh.parallel = 1) journals the same times at every test run.
type Clock struct {
	mu   sync.Mutex
	now  time.Time
	took map[string]time.Duration
}

// Default times of the World's work on a fake clock.
const (
	CommandTakes = 100 * time.Millisecond // a command without a time of its own
	FileTakes    = 10 * time.Millisecond  // a file change: a link, a rename, a write
)

// UseClock puts the World's nodes on a fake clock that starts at start, and returns it.
func (w *World) UseClock(start time.Time) *Clock {
	c := &Clock{now: start, took: map[string]time.Duration{}}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.clock = c
	return c
}

// Now is the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Takes makes command take d on every node.
func (c *Clock) Takes(command string, d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.took[command] = d
}

// ran moves the clock on by what command takes.
func (c *Clock) ran(command string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	d, ok := c.took[command]
	if !ok {
		d = CommandTakes
	}
	c.now = c.now.Add(d)
}

// changed moves the clock on by a file change.
func (c *Clock) changed() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(FileTakes)
}

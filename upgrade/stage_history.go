package upgrade

import (
	"sync"

	"github.com/cutover/cutover/journal"
)

// stageHistory is what the executions of a run did with its stages: the state each stage
// reached in the earlier executions the journal holds, and the stages any execution started,
// this one included, which are what an undo undoes. The zero value knows of no stage.
type stageHistory struct {
	mu sync.Mutex
	// prev are the stage states an earlier execution of the run left in the journal.
	prev map[string]journal.State
	// started are the stages any execution of the run started.
	started map[string]bool
}

// load takes over the journal's events of the earlier executions of the run.
func (h *stageHistory) load(events []journal.Event) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.prev = map[string]journal.State{}
	h.started = map[string]bool{}
	for _, e := range events {
		if e.State == journal.Skipped && h.prev[e.Stage] == journal.Done {
			// A later execution that skipped a stage done before (a run-once stage, or
			// one with nothing left to do) never hides that it was done.
			continue
		}
		h.prev[e.Stage] = e.State
		if e.State == journal.Started {
			h.started[e.Stage] = true
		}
	}
}

// markStarted notes that stage started in this execution.
func (h *stageHistory) markStarted(stage string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.started == nil {
		h.started = map[string]bool{}
	}
	h.started[stage] = true
}

// wasStarted reports whether any execution of the run started stage.
func (h *stageHistory) wasStarted(stage string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.started[stage]
}

// doneBefore reports whether an earlier execution of the run completed stage.
func (h *stageHistory) doneBefore(stage string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.prev[stage] == journal.Done
}

package upgrade

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/cutover/cutover/journal"
	"github.com/cutover/cutover/upgrade/config"
)

// The watch keeps everything it knows in the run's facts, which are never overwritten: the
// plan once, when the run begins, and per round (the first window is round 1; a resume after
// a failed watch starts the next) its start, one fact per check, one per boot of the master
// and its end. Status, the journal view and a resumed watch all read them back.
const (
	// factWatch is the run's watch plan (watchPlan.String), journaled when the run begins.
	factWatch = "watch"
	// factWatchPrefix prefixes a round's facts: "watch.<round>.start", ".check.<time>",
	// ".boot.<boot identity>", ".end".
	factWatchPrefix = "watch."
)

// watchStamp is the fixed-width form of a check's time in its fact's key: the keys sort as
// the checks ran.
const watchStamp = "20060102T150405.000000000Z"

// The ends of a watch round (the value of "watch.<round>.end" starts with one).
const (
	watchPassed     = "passed"
	watchFailed     = "failed"
	watchEndedEarly = "ended-early"
)

// watchPlan is how a run watches the cluster after its finish: the window, the time between
// two checks, and how many failed checks in a row and failed boots of the master end it failed.
type watchPlan struct {
	Window, Interval time.Duration
	Failures, Boots  int
}

// planWatch is the watch of a new run: the policy's, with the window of --watch when given.
func planWatch(p config.PolicyConfig, window *time.Duration) watchPlan {
	w := watchPlan{Window: p.Watch.Duration, Interval: p.WatchInterval.Duration, Failures: p.WatchFailures, Boots: p.WatchBoots}
	if window != nil {
		w.Window = *window
	}
	if w.Interval <= 0 {
		w.Interval = 30 * time.Second
	}
	w.Failures, w.Boots = max(w.Failures, 1), max(w.Boots, 1)
	return w
}

// String is the plan as the journal keeps it: "window=15m0s interval=30s failures=3 boots=3".
func (p watchPlan) String() string {
	return fmt.Sprintf("window=%s interval=%s failures=%d boots=%d", p.Window, p.Interval, p.Failures, p.Boots)
}

// parseWatchPlan reads what String wrote.
func parseWatchPlan(s string) (watchPlan, error) {
	var p watchPlan
	seen := 0
	for _, f := range strings.Fields(s) {
		k, v, _ := strings.Cut(f, "=")
		var err error
		switch k {
		case "window":
			p.Window, err = time.ParseDuration(v)
		case "interval":
			p.Interval, err = time.ParseDuration(v)
		case "failures":
			p.Failures, err = strconv.Atoi(v)
		case "boots":
			p.Boots, err = strconv.Atoi(v)
		default:
			err = fmt.Errorf("unknown field %q", k)
		}
		if err != nil {
			return watchPlan{}, fmt.Errorf("journal: watch plan %q: %w", s, err)
		}
		seen++
	}
	if seen != 4 || p.Window <= 0 || p.Interval <= 0 || p.Failures < 1 || p.Boots < 1 {
		return watchPlan{}, fmt.Errorf("journal: watch plan %q: not a watch", s)
	}
	return p, nil
}

// WatchStatus is where a run's watch stands, as its journal holds it: what `cutover status`,
// `cutover journal` and their JSON show.
type WatchStatus struct {
	// Window, Interval, MaxFailures and MaxBoots are the run's watch plan.
	Window      time.Duration `json:"window_ns"`
	Interval    time.Duration `json:"interval_ns"`
	MaxFailures int           `json:"max_failures"`
	MaxBoots    int           `json:"max_boots"`
	// Round is the window under way or last run: 1, and one more for each resume after a
	// failed watch.
	Round int `json:"round"`
	// Started is when the round began and Ends when its window ends; zero before the watch.
	Started time.Time `json:"started,omitzero"`
	Ends    time.Time `json:"ends,omitzero"`
	// Checks is how many checks the round made, Passed how many of them passed, and
	// Failures how many of the last ones failed in a row.
	Checks   int `json:"checks"`
	Passed   int `json:"passed"`
	Failures int `json:"failures"`
	// LastFailure is what the round's last failed check found, and LastFailureAt when.
	LastFailure   string    `json:"last_failure,omitempty"`
	LastFailureAt time.Time `json:"last_failure_at,omitzero"`
	// FailedBoots counts the boots of the master inside the round that did not become healthy.
	FailedBoots int `json:"failed_boots"`
	// State is "waiting" (the run has not reached its watch), "watching", "passed", "failed"
	// or "ended-early" ('cutover upgrade --abort'); End says how the round ended.
	State string `json:"state"`
	End   string `json:"end,omitempty"`
}

// Left is how much of the window is left at now; zero once it ended or before it began.
func (w *WatchStatus) Left(now time.Time) time.Duration {
	if w.Ends.IsZero() || now.After(w.Ends) {
		return 0
	}
	return w.Ends.Sub(now)
}

// watchStatusOf reads the watch of a run from its facts; nil when the run does not watch.
func watchStatusOf(facts map[string]string) *WatchStatus {
	p, err := parseWatchPlan(facts[factWatch])
	if err != nil {
		return nil
	}
	w := &WatchStatus{Window: p.Window, Interval: p.Interval, MaxFailures: p.Failures, MaxBoots: p.Boots, State: "waiting"}
	w.Round = watchRound(facts)
	prefix := fmt.Sprintf("%s%d.", factWatchPrefix, w.Round)
	if t, err := time.Parse(time.RFC3339Nano, facts[prefix+"start"]); err == nil {
		w.Started, w.Ends, w.State = t, t.Add(p.Window), "watching"
	}
	var checks []string
	for k, v := range facts {
		switch {
		case strings.HasPrefix(k, prefix+"check."):
			checks = append(checks, k)
		case strings.HasPrefix(k, prefix+"boot.") && strings.HasPrefix(v, watchFailed):
			w.FailedBoots++
		}
	}
	sort.Strings(checks)
	for _, k := range checks {
		w.Checks++
		v := facts[k]
		if v == watchPassed {
			w.Passed++
			w.Failures = 0
			continue
		}
		w.Failures++
		w.LastFailure = strings.TrimPrefix(strings.TrimPrefix(v, watchFailed), ": ")
		w.LastFailureAt, _ = time.Parse(watchStamp, strings.TrimPrefix(k, prefix+"check."))
	}
	if end, ok := facts[prefix+"end"]; ok {
		w.End = end
		w.State, _, _ = strings.Cut(end, ":")
	}
	return w
}

// watchRound is the last round a watch began or ended (1 before it began): the one status
// shows.
func watchRound(facts map[string]string) int {
	n := 1
	for facts[fmt.Sprintf("%s%d.start", factWatchPrefix, n+1)] != "" || facts[fmt.Sprintf("%s%d.end", factWatchPrefix, n+1)] != "" {
		n++
	}
	return n
}

// watchNextRound is the round a watch that runs now is in: the last one begun, unless that
// one ended failed (a resume after a failed watch watches a new window).
func watchNextRound(facts map[string]string) int {
	n := watchRound(facts)
	if strings.HasPrefix(facts[fmt.Sprintf("%s%d.end", factWatchPrefix, n)], watchFailed) {
		n++
	}
	return n
}

// loadWatch takes the watch of a pending run from its journal: a run that has none does not
// watch, whatever the config says now.
func (r *Run) loadWatch() error {
	v, ok := r.Fact(factWatch)
	if !ok {
		return nil
	}
	p, err := parseWatchPlan(v)
	if err != nil {
		return err
	}
	r.watch = p
	return nil
}

// endWatchEarly ends the watch of the pending run r early, as `cutover upgrade --abort` asks of
// a run that finished and is being watched: the round's end is journaled as such, the watch
// stage done with a message that says so, the run done, and its intent removed last.
func endWatchEarly(ctx context.Context, r *Run, stages []Stage) error {
	st := watchStatusOf(r.factsCopy())
	round := watchNextRound(r.factsCopy())
	how := fmt.Sprintf("%s: by 'cutover upgrade --abort' at %s", watchEndedEarly, time.Now().UTC().Format(time.RFC3339))
	if st != nil && st.Round == round && st.State == "watching" {
		how += fmt.Sprintf(", %d of %d checks passed, %s of %s left", st.Passed, st.Checks, st.Left(time.Now()).Round(time.Second), st.Window)
	}
	if _, err := r.Learn(ctx, fmt.Sprintf("%s%d.end", factWatchPrefix, round), how); err != nil {
		return err
	}
	r.log.Printf("run %d: watch %s", r.ID, how)
	r.report.Report(Event{Time: time.Now(), Type: "run", Run: r.ID, Message: fmt.Sprintf("ending the watch of run %d early: %s %s stays", r.ID, r.Config.App, r.To)})
	rn := &Runner{Stages: stages}
	i := slices.IndexFunc(stages, func(s Stage) bool { _, ok := s.(leaver); return ok })
	if i < 0 {
		return fmt.Errorf("run %d has no watch stage", r.ID)
	}
	rn.beginStage(r, i, stages[i])
	if err := rn.record(ctx, r, i, stages[i], journal.Done, 0, "ended early: "+strings.TrimPrefix(how, watchEndedEarly+": ")); err != nil {
		return err
	}
	rn.finish(ctx, r, journal.Succeeded)
	if err := releaseIntent(r); err != nil {
		return fmt.Errorf("run %d is done, but its intent could not be removed: %w; run 'cutover upgrade --resume' to remove it", r.ID, err)
	}
	return nil
}

// watched ends list with the watch when the plan watches the cluster after the run's finish.
func (p watchPlan) watched(list []Stage) []Stage {
	if p.Window <= 0 {
		return list
	}
	return append(list, watchWindow{})
}

package upgrade

import (
	"fmt"
	"testing"
	"time"

	"github.com/cutover/cutover/journal"
	"github.com/cutover/cutover/upgrade/metrics"
)

// TestSnapshotOf checks what the metrics make of the journal and the intent: which run is
// pending, the last run and last success of each kind, the downtime and the watch.
func TestSnapshotOf(t *testing.T) {
	t0 := time.Date(2026, 11, 21, 18, 0, 0, 0, time.UTC)
	ev := func(stage string, state journal.State) journal.Event {
		return journal.Event{Stage: stage, State: state}
	}
	done := journal.Run{ID: 1, Kind: "upgrade", From: "1.0.0", To: "1.1.0", Direction: "upgrade", Started: t0, Ended: t0.Add(30 * time.Second),
		Outcome: journal.Succeeded, Facts: map[string]string{factDowntime: "12.5s (node1 12.5s)"}, Events: []journal.Event{ev("finish", journal.Done)}}
	sync := journal.Run{ID: 2, Kind: "sync", Started: t0.Add(time.Hour), Ended: t0.Add(time.Hour + 5*time.Second), Outcome: journal.Succeeded,
		Facts: map[string]string{}}
	pastPONR := journal.Run{ID: 3, Kind: "", Direction: "upgrade", Started: t0.Add(2 * time.Hour), Outcome: journal.Running, PastPONR: true,
		Travel: journal.Forward, Events: []journal.Event{ev("config-upgrade", journal.Started)}}
	failed := pastPONR
	failed.Outcome, failed.Ended = journal.FailedPastPONR, t0.Add(2*time.Hour+time.Minute)
	failed.Events = []journal.Event{ev("start", journal.Failed)}
	rolledBack := journal.Run{ID: 3, Kind: "upgrade", Direction: "upgrade", Started: t0.Add(2 * time.Hour), Ended: t0.Add(2*time.Hour + 9*time.Second),
		Outcome: journal.RolledBack, Travel: journal.RollingBack, Facts: map[string]string{}, Events: []journal.Event{ev("intent", journal.Undone)}}
	syncRunning := journal.Run{ID: 4, Kind: "sync", Direction: "same-minor", Started: t0.Add(3 * time.Hour), Outcome: journal.Running,
		Events: []journal.Event{ev("switch", journal.Done)}}
	watching := done
	watching.ID, watching.Outcome, watching.Ended = 5, journal.Running, time.Time{}
	watching.Events = []journal.Event{ev("finish", journal.Done), ev("watch", journal.Started)}
	watching.Facts = map[string]string{factWatch: "window=15m0s interval=30s failures=3 boots=3",
		"watch.1.start": t0.Add(time.Minute).Format(time.RFC3339Nano), "watch.1.check.20261121T180130.000000000Z": "failed: verify exit 1"}
	aborted := watching
	aborted.ID, aborted.Outcome, aborted.Ended = 6, journal.Aborted, t0.Add(5*time.Minute)
	aborted.Facts = map[string]string{factWatch: "window=15m0s interval=30s failures=3 boots=3",
		"watch.1.start": t0.Add(time.Minute).Format(time.RFC3339Nano), "watch.1.end": "ended-early"}
	intent := &journal.Intent{RunID: 3, Kind: "upgrade", Direction: "upgrade", Created: t0.Add(2 * time.Hour)}

	tests := []struct {
		name   string
		runs   []journal.Run
		intent *journal.Intent
		want   string
	}{
		{"nothing yet", nil, nil, "pending <nil>; last []; watch <nil>"},
		{"done upgrade and sync", []journal.Run{done, sync}, nil,
			"pending <nil>; last [sync 2 done 5s down 0s/false ok 1 h; upgrade 1 done 30s down 12.5s/true ok 0 h]; watch <nil>"},
		{"interrupted past the point of no return", []journal.Run{done, pastPONR}, intent,
			"pending 3 upgrade upgrade config-upgrade past=true; last [upgrade 1 done 30s down 12.5s/true ok 0 h]; watch <nil>"},
		{"failed past the point of no return keeps its intent", []journal.Run{done, failed}, intent,
			"pending 3 upgrade upgrade start past=true; last [upgrade 3 failed 1m0s down 0s/false ok 0 h]; watch <nil>"},
		{"rolled back, its intent not removed yet", []journal.Run{done, rolledBack}, intent,
			"pending <nil>; last [upgrade 3 rolled-back 9s down 0s/false ok 0 h]; watch <nil>"},
		{"intent of a run the journal lacks", []journal.Run{done}, intent,
			"pending 3 upgrade upgrade  past=false; last [upgrade 1 done 30s down 12.5s/true ok 0 h]; watch <nil>"},
		{"sync in progress", []journal.Run{done, syncRunning}, nil,
			"pending 4 sync same-minor switch past=false; last [upgrade 1 done 30s down 12.5s/true ok 0 h]; watch <nil>"},
		{"watching", []journal.Run{done, watching}, nil,
			"pending 5 upgrade upgrade watch past=false; last [upgrade 1 done 30s down 12.5s/true ok 0 h]; watch 5 upgrade watching ends 16m0s failures 1"},
		{"watch ended early", []journal.Run{done, aborted}, nil,
			"pending <nil>; last [upgrade 6 aborted 5m0s down 0s/false ok 0 h]; watch 6 upgrade ended-early ends 16m0s failures 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := describeSnapshot(snapshotOf("demoapp", tt.runs, tt.intent, metrics.Look{}), t0)
			if got != tt.want {
				t.Errorf("snapshotOf =\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}

// describeSnapshot writes what TestSnapshotOf checks of s in one line; times of the last
// success are hours after t0.
func describeSnapshot(s metrics.Snapshot, t0 time.Time) string {
	pending := "<nil>"
	if p := s.Pending; p != nil {
		pending = fmt.Sprintf("%d %s %s %s past=%t", p.Run, p.Kind, p.Direction, p.Stage, p.PastPONR)
	}
	last := "["
	for i, l := range s.Last {
		if i > 0 {
			last += "; "
		}
		last += fmt.Sprintf("%s %d %s %s down %s/%t ok %d h", l.Kind, l.Run, l.Result, l.Ended.Sub(l.Started), l.Downtime, l.DowntimeRecorded,
			int(l.LastSuccess.Sub(t0).Hours()))
	}
	last += "]"
	watch := "<nil>"
	if w := s.Watch; w != nil {
		watch = fmt.Sprintf("%d %s %s ends %s failures %d", w.Run, w.Kind, w.State, w.Ends.Sub(t0), w.Failures)
	}
	return fmt.Sprintf("pending %s; last %s; watch %s", pending, last, watch)
}

package upgrade

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cutover/cutover/journal"
	"github.com/cutover/cutover/upgrade/config"
	"github.com/cutover/cutover/upgrade/upgradetest"
)

// worldCase is one stage run alone through the Runner on a fake cluster: the world before
// (opts, setup, config, prepare, facts an earlier stage learned), then what the journal says
// of the stage (state, learned facts) and the world after (links, the commands each node ran,
// and whatever check looks at), then, when undo is set, what the stage's Undo leaves. It is
// the one shape of the tests that run a stage on a World.
type worldCase struct {
	name     string
	opts     upgradetest.Options // Live is from when empty
	from, to string
	setup    func(t *testing.T, w *upgradetest.World)
	config   func(c *config.Config)
	facts    map[string]string // what an earlier stage of the run learned
	past     bool              // the run is past its point of no return
	before   []Stage           // stages that run ahead of stage, in the same Runner
	// prepare gives the run what it holds beyond its config: its dialer, its watch plan.
	prepare func(t *testing.T, w *upgradetest.World, r *Run)
	stage   Stage
	// alone runs the stage without the Runner and journals it done: the Runner releases what
	// a releaser holds (the intent) at the end of the run, before check could look at it.
	alone bool

	state   journal.State
	err     string            // part of the run's error; "" for none
	calls   []string          // "node: command", by node then in order; nil for none
	learned map[string]string // facts in the journal after the run
	links   map[string]string // node -> the version its links name after the run
	check   func(t *testing.T, w *upgradetest.World, r *Run)
	undo    *worldUndo
	// errCheck looks further at the run's error, when set.
	errCheck func(t *testing.T, err error)
	// callsChecked leaves the commands to check, for a stage that runs a command a number of
	// times that depends on time.
	callsChecked bool
}

// worldUndo is what a stage's Undo leaves: every command run so far, the links, and whatever
// check looks at.
type worldUndo struct {
	calls []string
	links map[string]string // node -> the version its links name after the undo
	check func(t *testing.T, w *upgradetest.World, r *Run)
}

// runWorldCases runs each case on a World of its own.
func runWorldCases(t *testing.T, cases []worldCase) {
	t.Helper()
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) { tt.run(t) })
	}
}

func (tt worldCase) run(t *testing.T) {
	opts := tt.opts
	if opts.Live == "" {
		opts.Live = tt.from
	}
	w := upgradetest.New(t, opts)
	if tt.setup != nil {
		tt.setup(t, w)
	}
	r := worldRun(t, w, tt.from, tt.to)
	r.Config.Policy.DrainTimeout.Duration = 1
	if tt.config != nil {
		tt.config(r.Config)
	}
	if tt.prepare != nil {
		tt.prepare(t, w, r)
	}
	r.pastPONR = tt.past
	ctx := context.Background()
	for k, v := range tt.facts {
		if _, err := r.Learn(ctx, k, v); err != nil {
			t.Fatal(err)
		}
	}
	var err error
	if tt.alone {
		err = tt.stage.Run(ctx, r)
		if _, jerr := r.journal.Record(ctx, r.ID, journal.Event{Stage: tt.stage.Name(), State: journal.Done}); jerr != nil {
			t.Fatal(jerr)
		}
	} else {
		err = (&Runner{Stages: append(slices.Clone(tt.before), tt.stage)}).Execute(ctx, r)
	}
	switch {
	case tt.err == "" && err != nil:
		t.Errorf("run: %v", err)
	case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
		t.Errorf("run: error %v, want one naming %q", err, tt.err)
	}
	if tt.errCheck != nil {
		tt.errCheck(t, err)
	}
	jr, jerr := journal.NewStore(JournalPath(r.Config)).Run(ctx, r.ID)
	if jerr != nil {
		t.Fatal(jerr)
	}
	if ev, ok := jr.LastEvent(tt.stage.Name()); !ok || ev.State != tt.state {
		t.Errorf("journal: %s %s, want %s", tt.stage.Name(), ev.State, tt.state)
	}
	for k, v := range tt.learned {
		if jr.Facts[k] != v {
			t.Errorf("journal fact %s = %q, want %q", k, jr.Facts[k], v)
		}
	}
	wantLinks(t, "run", w, tt.links)
	if got := w.AllCalls(); !tt.callsChecked && !slices.Equal(got, tt.calls) {
		t.Errorf("commands %q, want %q", got, tt.calls)
	}
	if tt.check != nil {
		tt.check(t, w, r)
	}
	if tt.undo == nil {
		return
	}
	u, ok := tt.stage.(undoer)
	if !ok {
		t.Fatalf("%s has no undo", tt.stage.Name())
	}
	if err := u.Undo(ctx, r); err != nil {
		t.Errorf("undo: %v", err)
	}
	wantLinks(t, "undo", w, tt.undo.links)
	if got := w.AllCalls(); !slices.Equal(got, tt.undo.calls) {
		t.Errorf("undo: commands %q, want %q", got, tt.undo.calls)
	}
	if tt.undo.check != nil {
		tt.undo.check(t, w, r)
	}
}

// wantLinks checks the version each node's links name, node -> version, after when.
func wantLinks(t *testing.T, when string, w *upgradetest.World, links map[string]string) {
	t.Helper()
	for node, v := range links {
		if got := w.Links(node); got != w.At(v) {
			t.Errorf("%s: %s links %s, want %s", when, node, got, w.At(v))
		}
	}
}

// removeTree removes a tree of node, a root-less path.
func removeTree(t *testing.T, w *upgradetest.World, node, tree string) {
	t.Helper()
	if err := os.RemoveAll(filepath.Join(w.Dir, node, tree)); err != nil {
		t.Fatal(err)
	}
}

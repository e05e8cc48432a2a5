package upgrade

import (
	"fmt"

	"github.com/cutover/cutover/journal"
	"github.com/cutover/cutover/layout"
)

// Kind is the workflow a run belongs to. The journal records it with the run, and with the
// intent of a run that can be pending; status, the journal view and the recovery of an
// interrupted run read it. A run's Direction says which way an upgrade run moves the
// cluster; the other kinds have none.
type Kind string

// The kinds of run. Each is a recipe (see doc.go) run through the one path, execute.
const (
	// KindUpgrade moves the cluster to another version: an upgrade, a downgrade or a
	// same-minor switch, all at once or rolling (`cutover upgrade`).
	KindUpgrade Kind = "upgrade"
	// KindSync brings nodes that missed a run to the cluster's live version (`cutover sync`).
	KindSync Kind = "sync"
	// KindStaging puts a version's trees on the nodes ahead of a switch (`cutover stage`;
	// the journal keeps the command's name).
	KindStaging Kind = "stage"
	// KindPrune removes installed versions no run needs (`cutover prune`).
	KindPrune Kind = "prune"
	// KindRestore puts the master's state back as a backup holds it (`cutover backup restore`).
	KindRestore Kind = "restore"
)

// kindTraits is what a kind of run means outside its own recipe: to prune, --downgrade and
// status reading the journal, and to the recovery of a run that was interrupted.
type kindTraits struct {
	// switches: a done run of the kind moved the cluster's links to its To version, so the
	// journal's last such run says where the cluster came from.
	switches bool
	// catchesUp: a done run of the kind brought the nodes it switched to the cluster's
	// version, which clears what an earlier run left unconfirmed on them.
	catchesUp bool
	// rerun is how an interrupted run of a kind that writes no intent is finished, as the
	// warning that marks it aborted says it: "run " + rerun + " to finish it".
	rerun string
	// pending is how a pending run of the kind is loaded and resumed; nil for a kind that
	// writes no intent and so is never pending.
	pending *pendingKind
}

// pendingKind is how a run of a kind that writes an intent is taken up again by
// `cutover upgrade --resume`, `--abort` and the boot resume.
type pendingKind struct {
	// target checks the versions the intent names and returns the run's target.
	target func(lay *layout.Layout, in journal.Intent) (Target, error)
	// stages returns the stage list of the pending run s loaded: what a resume runs, what an
	// abort undoes and where the point of no return lies.
	stages func(s *session) ([]Stage, error)
	// resume plans the resume of the pending run r going forward on rn; it reports false to
	// leave the plan to the one an upgrade follows (resume.go).
	resume func(r *Run, rn *Runner) bool
}

// kinds describes each kind of run. A kind the table does not know (a journal written by a
// later cutover) has no traits: it switched nothing, and is never taken up as pending.
var kinds = map[Kind]kindTraits{
	KindUpgrade: {switches: true, pending: &pendingKind{target: upgradeTarget, stages: upgradeStages}},
	KindRestore: {switches: true, pending: &pendingKind{target: restoreTarget, stages: restoreStagesOf, resume: resumeRestore}},
	KindSync:    {catchesUp: true, rerun: "the same sync again"},
	KindStaging: {rerun: "the same 'cutover stage' again"},
	KindPrune:   {rerun: "'cutover prune' again"},
}

// kindOf returns the kind a journal record names; records written before kinds were
// recorded are upgrade runs.
func kindOf(s string) Kind {
	if s == "" {
		return KindUpgrade
	}
	return Kind(s)
}

// traits returns what the table says of kind k.
func (k Kind) traits() kindTraits { return kinds[k] }

// runName names run id of kind k in messages: "run 7" for an upgrade, "restore run 7" for
// the others.
func (k Kind) runName(id uint64) string {
	if k == KindUpgrade {
		return fmt.Sprintf("run %d", id)
	}
	return fmt.Sprintf("%s run %d", k, id)
}

package upgrade

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

// kindOf returns the kind a journal record names; records written before kinds were
// recorded are upgrade runs.
func kindOf(s string) Kind {
	if s == "" {
		return KindUpgrade
	}
	return Kind(s)
}

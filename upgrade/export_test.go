package upgrade

// ProcScript is the listing of a node's processes that a run makes on every node to look for
// daemons of another version, for the benchmark of a run's floor.
const ProcScript = procScript

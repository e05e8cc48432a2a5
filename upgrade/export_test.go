package upgrade

// WrongVersionScript is the check for daemons of another version that a run makes on every
// node, for the benchmark of a run's floor.
const WrongVersionScript = wrongVersionScript

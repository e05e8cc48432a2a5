package upgrade

import (
	"os"
	"testing"
)

// TestMain sets the package's waits for the tests before any of them runs, so that no test
// writes a package variable that tests running in parallel read: the fake nodes' node_verify
// either passes or fails for good, so a rolling batch does not retry it.
func TestMain(m *testing.M) {
	nodeVerifyWait = 0
	os.Exit(m.Run())
}

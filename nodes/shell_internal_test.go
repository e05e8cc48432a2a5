package nodes

import (
	"strconv"
	"strings"
	"testing"
)

// TestShellNoBashStatus: the shell's own refusal (bash without job control) exits with the
// status the start line uses for a node without bash, so both fall back alike.
func TestShellNoBashStatus(t *testing.T) {
	want := "*) exit " + strconv.Itoa(shellNoBash) + ";;"
	if !strings.Contains(shellScript, want) {
		t.Errorf("shellScript does not refuse with %q", want)
	}
	if line := shellLine("bash", "", "node1", false); !strings.Contains(line, "|| exit "+strconv.Itoa(shellNoBash)+"\n") {
		t.Errorf("shellLine %q does not exit %d without bash", line[:80], shellNoBash)
	}
}

package cfgupgrade

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestDeepConfigRefused checks that a config, a migration or a value nesting deeper than
// MaxJSONDepth is refused quickly, naming the limit, and that one at the limit is read.
func TestDeepConfigRefused(t *testing.T) {
	t.Parallel()
	limit := fmt.Sprintf("deeper than %d levels", MaxJSONDepth)
	deep := func(n int) []byte {
		return []byte(`{"version": "1.0.0", "x": ` + strings.Repeat("[", n) + strings.Repeat("]", n) + "}")
	}
	spec := Spec{VersionKey: "/version", Encoding: Semver}

	// Ten million levels: the decoder would take seconds and much memory on it.
	doc := deep(10_000_000)
	start := time.Now()
	_, err := VersionOf(doc, spec)
	if took := time.Since(start); took > 250*time.Millisecond {
		t.Errorf("a config nested ten million levels deep took %v to refuse, want milliseconds", took)
	}
	if err == nil || !strings.Contains(err.Error(), limit) {
		t.Errorf("VersionOf(deep config) = %v, want an error saying %q", err, limit)
	}
	if _, _, err := Migrate(deep(MaxJSONDepth), spec, "1.0.0", "1.0.0", nil); err == nil || !strings.Contains(err.Error(), limit) {
		t.Errorf("Migrate(deep config) = %v, want an error saying %q", err, limit)
	}
	// The config's object itself is a level: MaxJSONDepth-1 arrays inside it are allowed.
	if v, err := VersionOf(deep(MaxJSONDepth-1), spec); err != nil || v != "1.0.0" {
		t.Errorf("VersionOf(config at the limit) = %q, %v, want 1.0.0", v, err)
	}
	// Brackets inside strings do not count.
	if v, err := VersionOf([]byte(`{"version": "1.0.0", "s": "`+strings.Repeat(`[{\"`, 1000)+`"}`), spec); err != nil || v != "1.0.0" {
		t.Errorf("VersionOf(brackets in a string) = %q, %v, want 1.0.0", v, err)
	}

	// A migration file and an op's value.
	mig := `{"from": "1.0", "to": "1.1", "up": [], "down": [], "x": ` + strings.Repeat("[", 1000) + strings.Repeat("]", 1000) + "}"
	read := func(string) ([]byte, error) { return []byte(mig), nil }
	if _, err := loadMigration("1.0-1.1.json", read); err == nil || !strings.Contains(err.Error(), limit) {
		t.Errorf("loadMigration(deep file) = %v, want an error saying %q", err, limit)
	}
	mig = `{"from": "1.0", "to": "1.1", "up": [{"op": "set", "path": "/a", "value": ` + strings.Repeat("[", 1000) + strings.Repeat("]", 1000) + `}], "down": []}`
	if _, err := loadMigration("1.0-1.1.json", read); err == nil || !strings.Contains(err.Error(), limit) {
		t.Errorf("loadMigration(deep value) = %v, want an error saying %q", err, limit)
	}
}

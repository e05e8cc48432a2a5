package upgrade

import (
	"context"
	"os"
	"path/filepath"
	"time"
)

// HoldDirEnv names the environment variable that turns on stage holds, cutover's fault
// injection point for crash tests: when it names a directory, the runner creates
// DIR/reached/STAGE as each stage starts (after the journal records it) and waits while
// DIR/hold/STAGE exists, so that a test can kill, signal or reboot cutover inside a known
// stage. Unset, as in production, it costs nothing.
const HoldDirEnv = "CUTOVER_HOLD_DIR"

// holdAt waits while a hold is set for stage.
func holdAt(ctx context.Context, stage string) error {
	dir := os.Getenv(HoldDirEnv)
	if dir == "" {
		return nil
	}
	reached := filepath.Join(dir, "reached")
	if err := os.MkdirAll(reached, 0o700); err == nil {
		_ = os.WriteFile(filepath.Join(reached, stage), nil, 0o600)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "hold", stage)); err != nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

package upgrade

// HoldDirEnv names the environment variable that turns on stage holds, cutover's fault
// injection point for crash tests: when it names a directory, the runner creates
// DIR/reached/STAGE as each stage starts (after the journal records it) and waits while
// DIR/hold/STAGE exists, so that a test can kill, signal or reboot cutover inside a known
// stage. Unset, it costs nothing; the release build has no holds (testhooks.go).
const HoldDirEnv = "CUTOVER_HOLD_DIR"

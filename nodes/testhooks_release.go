//go:build release

package nodes

// SkipSyncEnv is the test hooks' variable, which the release build ignores: it always syncs.
const SkipSyncEnv = "CUTOVER_TEST_SKIP_SYNC"

// skipSync is false: the release build always syncs.
const skipSync = false

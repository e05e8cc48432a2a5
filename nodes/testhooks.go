//go:build !release

package nodes

import "os"

// SkipSyncEnv names the environment variable that, set to 1 in a build with the test hooks,
// makes the syncs of this package's file operations do nothing: the directory syncs of every
// transport and the file sync of WriteFileAtomic, locally and over SFTP. The benchmark that
// measures what those syncs cost a whole run runs cutover with it and without it. The release
// build leaves this file out (testhooks_release.go stands in): there the variable does nothing.
const SkipSyncEnv = "CUTOVER_TEST_SKIP_SYNC"

// skipSync reports whether SkipSyncEnv is set to 1.
var skipSync = os.Getenv(SkipSyncEnv) == "1"

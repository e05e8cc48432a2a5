package staging

import (
	"context"
	"io"
	"time"
)

// SumsScript is the node's hashing script, for the tests of its choice of hasher.
const SumsScript = sumsScript

// Sums hashes the named files of dir on the node with the hasher h ("" lets the node pick,
// "coreutils" asks for sha256sum).
func Sums(ctx context.Context, c Conn, dir string, names []string, h string) (map[string]string, error) {
	defer func(old string) { hasher = old }(hasher)
	hasher = h
	return sums(ctx, c, dir, names)
}

// SetTestHooks sets the functions ReadTree calls once an entry is listed and once a file is
// opened, until the test ends.
func SetTestHooks(t interface{ Cleanup(func()) }, listed, opened func(name string)) {
	testHookListed, testHookOpened = listed, opened
	t.Cleanup(func() { testHookListed, testHookOpened = nil, nil })
}

// WriteTar writes the whole tree t as the tar stream Send sends.
func WriteTar(w io.Writer, t *Tree) (int64, error) {
	return writeTar(w, t, t.Entries, nil)
}

// WriteManifestScript and PlaceScript are the node scripts that receive a manifest, for the
// tests of a manifest cut short.
const (
	WriteManifestScript = writeManifestScript
	PlaceScript         = placeScript
)

// SendBare streams the tree's encoded stream (Encode must have run) to tar on the node,
// extracting it into dir, which must not exist: the transfer alone, with none of Send's
// checks and none of Place's renames and syncs, which the benchmark measures as the floor of
// a stage. With checked, the node then also does, in the same command, the work a stage owes
// beyond the transfer: it reads every file for its checksum while the tree is written to disk
// (as the check of a sent tree does), and waits for both.
func SendBare(ctx context.Context, c Conn, t *Tree, dir string, checked bool) error {
	script := `mkdir -- "$1" && exec tar -x -p --no-same-owner -b 256 -f - -C "$1"`
	if checked {
		script = `set -e
mkdir -- "$1"
tar -x -p --no-same-owner -b 256 -f - -C "$1"
cd -- "$1"
sync -f . &
find . -type f -print0 | xargs -0 -r openssl dgst -sha256 -r >/dev/null
wait $!`
	}
	_, err := streamEncoded(ctx, c, t.enc, nil, "sh", "-c", script, "cutover-bench", dir)
	return err
}

// SetStampClock makes stamps be taken at now() until the test ends: a clock ahead of the
// files' times makes none of their stamps racy.
func SetStampClock(t interface{ Cleanup(func()) }, now func() time.Time) {
	stampNow = now
	t.Cleanup(func() { stampNow = time.Now })
}

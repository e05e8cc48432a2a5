package staging

import (
	"context"
	"io"
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

// WriteManifestScript and ReceiveScript are the node scripts that receive a manifest, for the
// tests of a manifest cut short.
const (
	WriteManifestScript = writeManifestScript
	ReceiveScript       = receiveScript
)

package staging_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cutover/cutover/upgrade/staging"
)

// TestEncodedSend stages a tree encoded once on each kind of node: the placed tree is exactly
// the source, Sent and progress count the tree's bytes, and the stream holds the bytes that
// were checked when it was encoded, not the source files as they are later: a file changed
// after Encode (same size, same time) does not reach the nodes, and without the encoded
// stream the same change stops the send. Once released, Send reads the tree again.
func TestEncodedSend(t *testing.T) {
	t.Parallel()
	tree := sourceTree(t)
	src := tree.Dir
	original, err := staging.ReadTree(src)
	if err != nil {
		t.Fatal(err)
	}
	release, err := tree.Encode(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	// The same size and time, other bytes.
	readme := filepath.Join(src, "share/doc/README")
	fi, err := os.Stat(readme)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(readme, []byte("READ ME\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chtimes(readme, fi.ModTime(), fi.ModTime()); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	tgs := targets(t)
	for _, tg := range tgs {
		var told int64
		sent, err := staging.Send(ctx, tg.conn, tree, tg.final, func(b int64) { told += b })
		if err != nil {
			t.Fatalf("%s: Send of the encoded tree: %v", tg.name, err)
		}
		if sent.Bytes != tree.Bytes || told != tree.Bytes {
			t.Errorf("%s: Send counted %d bytes and told progress of %d, want the tree's %d", tg.name, sent.Bytes, told, tree.Bytes)
		}
		if err := staging.Place(ctx, tg.conn, tree, tg.final, sent); err != nil {
			t.Fatalf("%s: %v", tg.name, err)
		}
		got, err := staging.ReadTree(tg.final)
		if err != nil {
			t.Fatal(err)
		}
		if !got.Equal(original) {
			t.Errorf("%s: the placed tree differs from the source as it was encoded:\n got %s\nwant %s", tg.name, describe(got), describe(original))
		}
		if data, err := os.ReadFile(filepath.Join(tg.final, "share/doc/README")); err != nil || string(data) != "read me\n" {
			t.Errorf("%s: README = %q, %v; want the bytes checked at Encode", tg.name, data, err)
		}
	}
	release()
	release() // a second release does nothing
	tg := tgs[0]
	other := filepath.Join(filepath.Dir(tg.final), "1.3.0")
	if _, err := staging.Send(ctx, tg.conn, tree, other, nil); err == nil || !strings.Contains(err.Error(), "changed since it was read") {
		t.Errorf("Send of a changed source after release = %v, want it refused as changed", err)
	}
}

// TestEncodeRefused: a directory where no unnamed file can be made is an error, and the tree
// is sent as before.
func TestEncodeRefused(t *testing.T) {
	t.Parallel()
	tree := sourceTree(t)
	if _, err := tree.Encode(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Fatal("Encode into a missing directory: err = nil")
	}
	tg := targets(t)[0]
	sent, err := staging.Send(context.Background(), tg.conn, tree, tg.final, nil)
	if err != nil || sent.Bytes != tree.Bytes {
		t.Fatalf("Send after a refused Encode = %v, %v; want the whole tree sent", sent, err)
	}
}

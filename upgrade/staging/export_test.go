package staging

import "context"

// SumsScript is the node's hashing script, for the tests of its choice of hasher.
const SumsScript = sumsScript

// Sums hashes the named files of dir on the node with the hasher h ("" lets the node pick,
// "coreutils" asks for sha256sum).
func Sums(ctx context.Context, c Conn, dir string, names []string, h string) (map[string]string, error) {
	defer func(old string) { hasher = old }(hasher)
	hasher = h
	return sums(ctx, c, dir, names)
}

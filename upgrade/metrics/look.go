package metrics

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// maxLookSize bounds the file a look is kept in: a node is a few dozen bytes.
const maxLookSize = 4 << 20

// LoadLook reads the look kept at path (in cutover's state directory). A file that does not
// exist is an empty look; a link, a file that is not regular, too big or not a look is an
// error naming it.
func LoadLook(path string) (Look, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NOFOLLOW, 0)
	if errors.Is(err, os.ErrNotExist) {
		return Look{}, nil
	}
	if err != nil {
		return Look{}, fmt.Errorf("read %s: %w", path, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return Look{}, fmt.Errorf("read %s: %w", path, err)
	}
	if !fi.Mode().IsRegular() {
		return Look{}, fmt.Errorf("read %s: not a regular file", path)
	}
	data, err := io.ReadAll(io.LimitReader(f, maxLookSize+1))
	if err != nil {
		return Look{}, fmt.Errorf("read %s: %w", path, err)
	}
	if len(data) > maxLookSize {
		return Look{}, fmt.Errorf("read %s: larger than %d bytes", path, maxLookSize)
	}
	var l Look
	if err := json.Unmarshal(data, &l); err != nil {
		return Look{}, fmt.Errorf("read %s: %w", path, err)
	}
	return l, nil
}

// SaveLook keeps l at path, atomically (WriteFile), readable by root only.
func SaveLook(path string, l Look) error {
	data, err := json.Marshal(l)
	if err != nil {
		return err
	}
	return WriteFile(path, append(data, '\n'), 0o600)
}

// Merge returns l with the nodes of seen put over it: a node seen replaces the one of the
// same name, the others stay as they were last seen; a node seen without a version (it did
// not answer, or its version was not read) keeps the version it was last seen at. At becomes
// at when anything was seen.
func (l Look) Merge(seen []Node, at time.Time) Look {
	if len(seen) == 0 {
		return l
	}
	out := Look{At: at}
	index := map[string]int{}
	for _, n := range l.Nodes {
		index[n.Name] = len(out.Nodes)
		out.Nodes = append(out.Nodes, n)
	}
	for _, n := range seen {
		if i, ok := index[n.Name]; ok {
			if n.Version == "" {
				n.Version = out.Nodes[i].Version
			}
			out.Nodes[i] = n
			continue
		}
		index[n.Name] = len(out.Nodes)
		out.Nodes = append(out.Nodes, n)
	}
	return out
}

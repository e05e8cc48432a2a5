package backup

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"
)

// Info describes one archive of a backup directory.
type Info struct {
	// ID names the archive: its file name without .tar.gz.
	ID   string `json:"id"`
	Path string `json:"path"`
	// Kind is KindSwitch or KindBeforeRestore.
	Kind    string    `json:"kind"`
	From    string    `json:"from"`
	To      string    `json:"to"`
	Run     uint64    `json:"run"`
	Created time.Time `json:"created"`
	// Size is the archive's size in bytes; Files the number of regular files it holds.
	Size  int64 `json:"size"`
	Files int   `json:"files"`
	// ManifestOK is true when the manifest was read and agrees with the archive's name.
	ManifestOK bool `json:"manifest_ok"`
	// Verified is true when the whole archive was read and checked (only when asked).
	Verified bool `json:"verified"`
	// Problem says why ManifestOK or the verification failed.
	Problem string `json:"problem,omitempty"`
}

// idPattern is the shape of every archive id: the application, a version, then
// "-to-VERSION" or "-before-restore", then the UTC time.
var idPattern = regexp.MustCompile(`^[a-z0-9][a-z0-9._+-]*-[0-9][0-9A-Za-z.+-]*-(to-[0-9][0-9A-Za-z.+-]*|before-restore)-[0-9]{8}T[0-9]{6}Z$`)

// maxID bounds an archive id; real ones are far shorter.
const maxID = 200

// CheckID refuses an id that cannot name an archive: the wrong shape, a path, "..", control
// characters, too long.
func CheckID(id string) error {
	if len(id) > maxID || strings.Contains(id, "..") || !idPattern.MatchString(id) {
		return fmt.Errorf("backup %q: not a backup id (an id as 'cutover backup list' shows it, such as app-1.0.0-to-1.1.0-20260102T150405Z)", id)
	}
	return nil
}

// KindOf is the kind of archive an id names.
func KindOf(id string) string {
	if strings.Contains(id, "-"+KindBeforeRestore+"-") {
		return KindBeforeRestore
	}
	return KindSwitch
}

// IDs returns the ids of app's archives in dir, oldest first: regular files (not symlinks)
// named <id>.tar.gz with an id of the right shape. A missing directory has none.
func IDs(dir, app string) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list backups: %w", err)
	}
	var ids []string
	for _, e := range entries {
		id, ok := strings.CutSuffix(e.Name(), ".tar.gz")
		if !ok || !e.Type().IsRegular() || !strings.HasPrefix(id, app+"-") || CheckID(id) != nil {
			continue
		}
		ids = append(ids, id)
	}
	sort.Slice(ids, func(i, j int) bool {
		si, sj := ids[i][len(ids[i])-len(Stamp):], ids[j][len(ids[j])-len(Stamp):]
		if si != sj {
			return si < sj
		}
		return ids[i] < ids[j]
	})
	return ids, nil
}

// CheckManifest checks that the manifest of archive id is of app and agrees with the id.
func CheckManifest(app, id string, m Manifest) error {
	if m.App != app {
		return fmt.Errorf("the manifest is of application %q, not %s", m.App, app)
	}
	if m.Kind != KindOf(id) || m.ID() != id {
		return fmt.Errorf("the manifest (%s %s -> %s, created %s) does not match the archive's name", m.Kind, m.From, m.To, m.Created.UTC().Format(Stamp))
	}
	return nil
}

// List lists app's archives in dir, oldest first, reading each one's manifest and, with
// verify, every archive through (Verify). It only reads. An archive that cannot be read or
// does not check out is listed with its problem.
func List(ctx context.Context, dir, app string, sc Scope, verify bool) ([]Info, error) {
	ids, err := IDs(dir, app)
	if err != nil {
		return nil, err
	}
	out := []Info{}
	for _, id := range ids {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		out = append(out, describe(ctx, dir, app, id, sc, verify))
	}
	return out, nil
}

// describe reads what it can of archive id.
func describe(ctx context.Context, dir, app, id string, sc Scope, verify bool) Info {
	b := Info{ID: id, Path: filepath.Join(dir, id+".tar.gz"), Kind: KindOf(id)}
	if info, err := os.Lstat(b.Path); err == nil {
		b.Size = info.Size()
	}
	m, err := ReadManifest(b.Path)
	if err != nil {
		b.Problem = err.Error()
		if IsOldFormat(err) {
			b.Problem = errOldFormat.Error()
		}
		return b
	}
	b.From, b.To, b.Run, b.Created, b.Files = m.From, m.To, m.Run, m.Created, m.Count(TypeFile)
	if err := CheckManifest(app, id, m); err != nil {
		b.Problem = err.Error()
		return b
	}
	b.ManifestOK = true
	if verify {
		f, err := openArchive(b.Path)
		if err == nil {
			_, err = Verify(ctx, f, sc)
			f.Close()
		}
		if err != nil {
			b.Problem = err.Error()
			return b
		}
		b.Verified = true
	}
	return b
}

// Prune removes the oldest switch archives of app in dir beyond keep, but never the newest
// one taken from the live version, then syncs dir. Archives kept before a restore are not
// counted and never removed. It returns the removed paths.
//
// Age is the order of the runs that took the archives, as runs (archive id -> run id, from
// the journal) gives it, never the wall clock: a clock that jumped backwards gives the newest
// archive the oldest time in its name, and it must still count as the newest. Archives no
// journaled run names are older than every one that is, and among themselves ordered by the
// time in their names.
func Prune(dir, app string, keep int, live string, runs map[string]uint64) ([]string, error) {
	ids, err := IDs(dir, app)
	if err != nil {
		return nil, err
	}
	var switches []string
	for i := len(ids) - 1; i >= 0; i-- { // newest time first
		if KindOf(ids[i]) == KindSwitch {
			switches = append(switches, ids[i])
		}
	}
	sort.SliceStable(switches, func(i, j int) bool { return runs[switches[i]] > runs[switches[j]] })
	protect := ""
	for _, id := range switches {
		if strings.HasPrefix(id, app+"-"+live+"-to-") {
			protect = id
			break
		}
	}
	var removed []string
	var errs []error
	for i, id := range switches {
		if i < keep || id == protect {
			continue
		}
		p := filepath.Join(dir, id+".tar.gz")
		if err := os.Remove(p); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, p)
	}
	if len(removed) > 0 {
		// Once for all the removals: a removed archive must not come back after a power cut.
		errs = append(errs, syncPath(dir))
	}
	return removed, errors.Join(errs...)
}

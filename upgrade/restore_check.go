package upgrade

import (
	"context"
	"fmt"
	"io"

	archive "github.com/cutover/cutover/upgrade/backup"
)

// restoreCheck is every check of a restore, before anything is written: the archive read
// through against its manifest (paths, types, owners, modes, sizes, checksums, link
// targets), the manifest against the archive's name, the disk against the archive (no
// directory of it is a link or a file here, the versions its links name are installed),
// and the daemons stopped (verify does not exit 0).
type restoreCheck struct{ st *restoring }

func (restoreCheck) Name() string { return "check" }

func (restoreCheck) Where() Where { return OnMaster }

// ReadOnly: the check changes nothing.
func (restoreCheck) ReadOnly() {}

func (c restoreCheck) Run(ctx context.Context, r *Run) error {
	st := c.st
	if _, err := st.file.Seek(0, io.SeekStart); err != nil {
		return fmt.Errorf("read %s: %w", st.rep.Archive, err)
	}
	a, err := archive.Verify(ctx, st.file, st.sc)
	if err == nil {
		err = archive.CheckManifest(r.Config.App, st.id, a.Manifest())
	}
	if err != nil {
		return fmt.Errorf("backup %s does not check out, nothing was restored: %w", st.id, err)
	}
	if st.plan, err = archive.NewPlan(ctx, a, st.sc); err != nil {
		return fmt.Errorf("backup %s cannot be restored, nothing was restored: %w", st.id, err)
	}
	if err := checkDaemonsStopped(ctx, r); err != nil {
		return err
	}
	m := a.Manifest()
	st.rep.Version = m.From
	if r.Resumed {
		// The master may be half restored: what it ran before is what the run recorded.
		st.rep.Previous = r.From
	} else {
		st.rep.Previous = restoreLiveVersion(ctx, r)
		r.From, r.To = st.rep.Previous, st.rep.Version
	}
	st.rep.Skipped = append(st.rep.Skipped, m.Skipped...)
	for l, target := range m.Links {
		st.rep.Links[l] = target
	}
	st.note = fmt.Sprintf("%s: %d entries check out; verify does not exit 0, the daemons are down", st.id, len(m.Entries))
	r.Note("%s", st.note)
	return nil
}

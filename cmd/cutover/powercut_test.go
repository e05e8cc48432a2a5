package main

import (
	"archive/tar"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/cutover/cutover/journal"
	"github.com/cutover/cutover/upgrade/staging"
)

// The power-cut mode of TestCrashPoints. SIGKILL keeps the page cache: what cutover wrote is
// seen by the next run whether or not it reached the disk. A power cut of the master does not
// keep it. In this mode each point's fixture root is a loop-mounted ext4 of its own, mounted
// with a commit interval of ten minutes, so that only what cutover made durable (an fsync of a
// file, or of anything that committed the file system's log) survives. At the crash point
// cutover shuts the file system down with FS_IOC_SHUTDOWN and FS_GOING_DOWN_NOLOGFLUSH
// (upgrade.CrashPowerCutEnv), as xfstests' godown does, and kills itself; the test unmounts
// the file system and mounts it again (its log is replayed, as at boot), checks that the
// journal claims nothing the disk lost, and runs the same recovery and checks as the SIGKILL
// mode.
//
// What the disk holds: the version trees, /etc/app, the application's state (var/lib/app),
// cutover's state directory and config, and a stage's source. What it does not: run/, the
// fixture's record of the daemons, the queue and the reconciler (the state of processes and
// of the application, which cutover changes by commands, not by files), and test/, the test's
// own logs; both are bind-mounted from beside the disk.
//
// make test cuts the power at a spread of each scenario's points (pointSpread); with
// CUTOVER_CRASH_ALL=1 (make crash-all) at every point.

// crashAllEnv makes the crash-point test kill cutover and cut the power at every crash point.
const crashAllEnv = "CUTOVER_CRASH_ALL"

const (
	// powerDiskSize is the size of a point's file system: a few backups and a staged version.
	powerDiskSize = 64 << 20
	// powerDiskOptions are the mount options: the log is committed every ten minutes, never
	// during a point, so that nothing but an fsync makes anything durable.
	powerDiskOptions = "commit=600,noinit_itable"
	// powerUnmountWait bounds the wait for a file system to be unmounted: an SSH session of
	// a killed run may hold it for a moment.
	powerUnmountWait = 10 * time.Second
)

// powerBinds are the directories of a fixture's root that live beside its disk.
var powerBinds = []string{"run", "test"}

// powerCutReady says why the power-cut mode cannot run here, or "".
func powerCutReady() string {
	if os.Geteuid() != 0 {
		return "the power-cut mode mounts file systems: it must run as root"
	}
	for _, tool := range []string{"mkfs.ext4", "losetup"} {
		if _, err := exec.LookPath(tool); err != nil {
			return tool + " is missing (test/setup.sh installs it)"
		}
	}
	if _, err := os.Stat("/dev/loop-control"); err != nil {
		return "no loop devices: " + err.Error()
	}
	return ""
}

// requirePowerCut skips the power-cut mode when it cannot run here, unless CI is "true": then
// the test fails.
func requirePowerCut(t *testing.T) {
	t.Helper()
	why := powerCutReady()
	if why == "" {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatal(why)
	}
	t.Skip(why + " (with CI=true this is a failure)")
}

// powerDisk is one point's file system: an image file, its loop device, and the fixture root
// it is mounted at.
type powerDisk struct {
	root, image, dev string
	binds            []string // the directories of root that live beside the disk
	mounted          []string // mount points, the disk's root first
}

// powerDisks are the disks a scenario made, so that whatever a point left mounted or attached
// is released when the scenario ends, failed or not.
type powerDisks struct {
	// images is where the disks' image files are: in memory (/dev/shm) where it can be, so
	// that an fsync on a disk costs no write to this machine's own disk, or else beside each
	// disk's mount point.
	images string
	mu     sync.Mutex
	disks  map[*powerDisk]bool
}

// losetupMu serialises losetup --find: two at once may pick the same free device.
var losetupMu sync.Mutex

func newPowerDisks(t *testing.T) *powerDisks {
	d := &powerDisks{disks: map[*powerDisk]bool{}}
	t.Cleanup(func() {
		d.mu.Lock()
		defer d.mu.Unlock()
		for disk := range d.disks {
			if err := disk.release(); err != nil {
				t.Errorf("power cut: %v", err)
			}
		}
		if d.images != "" {
			_ = os.RemoveAll(d.images)
		}
	})
	return d
}

// create makes, formats, attaches and mounts a new disk at a new directory under base, with
// powerBinds beside it.
func (d *powerDisks) create(base string) (*powerDisk, error) {
	root, err := os.MkdirTemp(base, "p")
	if err != nil {
		return nil, err
	}
	return d.createAt(root, powerBinds)
}

// createAt makes, formats, attaches and mounts a new disk at root, an empty directory, with
// the directories binds of root beside it.
func (d *powerDisks) createAt(root string, binds []string) (*powerDisk, error) {
	disk := &powerDisk{root: root, image: root + ".img", binds: binds}
	d.mu.Lock()
	if d.images == "" {
		var fs unix.Statfs_t
		if unix.Statfs("/dev/shm", &fs) == nil && fs.Type == unix.TMPFS_MAGIC {
			d.images, _ = os.MkdirTemp("/dev/shm", "cutover-powercut-")
		}
	}
	images := d.images
	d.disks[disk] = true
	d.mu.Unlock()
	fail := func(err error) (*powerDisk, error) {
		return nil, errors.Join(err, d.release(disk))
	}
	var img *os.File
	var err error
	if images != "" {
		img, err = os.CreateTemp(images, filepath.Base(root)+"-*.img")
		if img != nil {
			disk.image = img.Name()
		}
	} else {
		img, err = os.OpenFile(disk.image, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	}
	if err == nil {
		err = errors.Join(img.Truncate(powerDiskSize), img.Close())
	}
	if err != nil {
		disk.image = ""
		return fail(err)
	}
	if out, err := exec.Command("mkfs.ext4", "-q", "-F", "-b", "4096", "-E", "lazy_itable_init=1,lazy_journal_init=1", disk.image).CombinedOutput(); err != nil {
		return fail(fmt.Errorf("mkfs.ext4 %s: %v: %s", disk.image, err, out))
	}
	losetupMu.Lock()
	out, err := exec.Command("losetup", "--find", "--show", disk.image).CombinedOutput()
	losetupMu.Unlock()
	if err != nil {
		return fail(fmt.Errorf("losetup %s: %v: %s", disk.image, err, out))
	}
	disk.dev = strings.TrimSpace(string(out))
	for _, b := range disk.binds {
		if err := os.Mkdir(disk.root+"."+b, 0o755); err != nil {
			return fail(err)
		}
	}
	// Busy for a moment when a container starting beside the test copied this mount
	// namespace while the device's last user let it go: tried again.
	for deadline := time.Now().Add(powerUnmountWait); ; time.Sleep(20 * time.Millisecond) {
		err := disk.mount()
		if err == nil {
			break
		}
		if uerr := disk.unmount(); uerr != nil || !errors.Is(err, unix.EBUSY) || time.Now().After(deadline) {
			return fail(errors.Join(err, uerr))
		}
	}
	return disk, nil
}

// release unmounts a disk, detaches its loop device and removes its files.
func (d *powerDisks) release(disk *powerDisk) error {
	err := disk.release()
	d.mu.Lock()
	delete(d.disks, disk)
	d.mu.Unlock()
	return err
}

// mount mounts the disk at its root, its log replayed, and the directories that live beside
// it over theirs.
func (disk *powerDisk) mount() error {
	if err := unix.Mount(disk.dev, disk.root, "ext4", 0, powerDiskOptions); err != nil {
		return fmt.Errorf("mount %s at %s: %w", disk.dev, disk.root, err)
	}
	disk.mounted = append(disk.mounted, disk.root)
	for _, b := range disk.binds {
		target := filepath.Join(disk.root, b)
		if err := os.MkdirAll(target, 0o755); err != nil {
			return err
		}
		if err := unix.Mount(disk.root+"."+b, target, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("bind %s.%s at %s: %w", disk.root, b, target, err)
		}
		disk.mounted = append(disk.mounted, target)
	}
	return nil
}

// unmount unmounts what mount mounted, innermost first, waiting for a busy one to be let go.
func (disk *powerDisk) unmount() error {
	for len(disk.mounted) > 0 {
		target := disk.mounted[len(disk.mounted)-1]
		deadline := time.Now().Add(powerUnmountWait)
		for {
			err := unix.Unmount(target, 0)
			if err == nil || errors.Is(err, unix.EINVAL) { // EINVAL: not mounted
				break
			}
			if !errors.Is(err, unix.EBUSY) || time.Now().After(deadline) {
				return fmt.Errorf("unmount %s: %w", target, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
		disk.mounted = disk.mounted[:len(disk.mounted)-1]
	}
	return nil
}

// sync makes everything on the disk durable: the state a point starts from.
func (disk *powerDisk) sync() error {
	fd, err := unix.Open(disk.root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return unix.Syncfs(fd)
}

// shutDown reports whether the disk was shut down: a shut-down ext4 refuses every write.
func (disk *powerDisk) shutDown() bool {
	probe := filepath.Join(disk.root, ".power-probe")
	err := os.WriteFile(probe, nil, 0o600)
	if err == nil {
		_ = os.Remove(probe)
	}
	return err != nil
}

// restart is the boot after the power cut: unmount, and mount again, which replays the log.
// The file system must be gone first: a mount namespace copied from this one meanwhile (a
// container starting) holds it until the copy is let go, and mounting the device again while
// it is held would bring back the shut-down file system, not a new one.
func (disk *powerDisk) restart() error {
	if err := disk.unmount(); err != nil {
		return err
	}
	deadline := time.Now().Add(powerUnmountWait)
	for ; ; time.Sleep(20 * time.Millisecond) {
		// An exclusive open of a block device fails while a file system on it is mounted.
		fd, err := unix.Open(disk.dev, unix.O_RDONLY|unix.O_EXCL|unix.O_CLOEXEC, 0)
		if err == nil {
			unix.Close(fd)
		} else if !errors.Is(err, unix.EBUSY) || time.Now().After(deadline) {
			return fmt.Errorf("%s is still in use after it was unmounted: %w", disk.dev, err)
		} else {
			continue
		}
		// The device may be held a moment more (a container starting beside the test copies
		// this mount namespace and lets it go): the mount is tried again while it says busy.
		err = disk.mount()
		if err == nil || !errors.Is(err, unix.EBUSY) || time.Now().After(deadline) {
			return err
		}
		if uerr := disk.unmount(); uerr != nil {
			return errors.Join(err, uerr)
		}
	}
}

// release unmounts the disk, detaches its loop device and removes it. A disk that cannot be
// unmounted is detached lazily, so that it goes once the last process lets it go.
func (disk *powerDisk) release() error {
	var errs []error
	if err := disk.unmount(); err != nil {
		errs = append(errs, err)
		for i := len(disk.mounted) - 1; i >= 0; i-- {
			_ = unix.Unmount(disk.mounted[i], unix.MNT_DETACH)
		}
		disk.mounted = nil
	}
	if disk.dev != "" {
		if out, err := exec.Command("losetup", "-d", disk.dev).CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("losetup -d %s: %v: %s", disk.dev, err, out))
		}
		disk.dev = ""
	}
	if len(errs) == 0 {
		errs = append(errs, os.RemoveAll(disk.root))
		if disk.image != "" {
			errs = append(errs, os.Remove(disk.image))
		}
		for _, b := range disk.binds {
			errs = append(errs, os.RemoveAll(disk.root+"."+b))
		}
	}
	return errors.Join(errs...)
}

// pointKind names what a crash point is, the same for every point of the kind: "journal:
// done", "command started", "rename", "intent written", ...; and for a journal record of a
// stage's state, the stage.
func pointKind(desc string) (kind, stage string) {
	words := strings.Fields(desc)
	if len(words) == 0 {
		return "", ""
	}
	if words[0] == "journal:" && len(words) > 1 {
		if len(words) == 3 && slices.Contains([]string{"started", "done", "failed", "undone", "skipped"}, words[2]) {
			return "journal: " + words[2], words[1]
		}
		return "journal: " + words[1], ""
	}
	// An effect on a node is named after it: "node2: rename ...".
	if strings.HasSuffix(words[0], ":") && len(words) > 1 && words[0] != "config:" && words[0] != "restore:" {
		words = words[1:]
	}
	if words[0] == "command" && len(words) > 1 {
		return "command " + strings.TrimSuffix(words[1], ":"), ""
	}
	if len(words) > 1 && (strings.HasSuffix(words[0], ":") || words[1] == "written" || words[1] == "removed") {
		return words[0] + " " + words[1], ""
	}
	return words[0], ""
}

// pointSpread returns the points of a scenario's crash log that make test kills cutover at
// and cuts the power at (make crash-all: every point): every record that ends a stage (done, undone, failed: where the journal claims an
// effect, and the point after the stage's last effect), the first point of every other kind
// of effect (a command started or finished, a symlink, a rename, a write, the intent, a
// backup, a config migration, every kind of journal record), and the last point. The points
// it leaves out repeat a kind of effect already tried (another command's, another node's,
// another file's, another stage's start): about half of them, and most of a rolling budget's
// waits.
func pointSpread(points []string) []int {
	var out []int
	kinds := map[string]bool{}
	eachPoint(points, func(n int, desc, kind, stage string) {
		ends := stage != "" && (kind == "journal: done" || kind == "journal: undone" || kind == "journal: failed")
		if ends || !kinds[kind] || n == len(points) {
			out = append(out, n)
		}
		kinds[kind] = true
	})
	return out
}

// eachPoint calls fn with the number, description, kind and stage (pointKind) of every line
// of a crash log.
func eachPoint(points []string, fn func(n int, desc, kind, stage string)) {
	for _, l := range points {
		num, desc, _ := strings.Cut(l, " ")
		n, err := strconv.Atoi(num)
		if err != nil {
			continue
		}
		kind, stage := pointKind(desc)
		fn(n, desc, kind, stage)
	}
}

// sortedPoints returns the numbers picked, in order.
func sortedPoints(picked map[int]bool) []int {
	out := make([]int, 0, len(picked))
	for n := range picked {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// flagStages are the stages that read or change the queue's and the reconciler's flags.
var flagStages = []string{"preflight", "drain", "pause-reconciler", "undrain", "finish"}

// flagsSpread returns the points of a flags-set scenario's crash log that make test kills
// cutover at: those of pointSpread, every point of a command on the queue or the
// reconciler, every journal record of a stage that reads or changes the flags, and every
// record of the run's way (travel, the point of no return, its end), which decides whether
// a recovery puts them back. Elsewhere a flags-set run does what its flags-clear twin does,
// which make test kills at the spread; make crash-all kills both at every point.
func flagsSpread(points []string) []int {
	picked := map[int]bool{}
	for _, n := range pointSpread(points) {
		picked[n] = true
	}
	eachPoint(points, func(n int, desc, kind, stage string) {
		switch {
		case strings.Contains(desc, "command started: : queue_"), strings.Contains(desc, "command finished: : queue_"),
			strings.Contains(desc, "command started: : reconciler_"), strings.Contains(desc, "command finished: : reconciler_"),
			slices.Contains(flagStages, stage),
			kind == "journal: travel", kind == "journal: past", kind == "journal: finish":
			picked[n] = true
		}
	})
	return sortedPoints(picked)
}

// checkDurable checks, right after the power came back and before any recovery, that the
// journal claims nothing the disk lost: a stage done (or undone) whose effect is not there (the
// switch's links, the config migration, the intent, a restore, a staged version), a run done,
// rolled back or aborted whose end is not on disk, a backup it names that does not read
// through; and that config.json is whole. archive is the state a restore restores.
func (sc crashScenario) checkDurable(f *crashFixture, p *crashPoint, ref crashReference, w crashWorld, runs []journal.Run, archive map[string]string) {
	fail := func(what, format string, args ...any) {
		p.problems = append(p.problems, crashProblem{"power cut: " + what, fmt.Sprintf(format, args...)})
	}
	configs := map[string][]byte{sc.from: ref.sourceConfig, sc.to: ref.targetConfig}
	switch {
	case sc.kind == "restore":
		configs = map[string][]byte{sc.to: ref.sourceConfig, sc.from: ref.targetConfig}
	case sc.kind == "sync" || sc.kind == "prune": // the config is the live version's
		configs = map[string][]byte{sc.to: ref.sourceConfig}
	}
	// Whatever the journal says, a file cutover replaces is whole: one version's bytes.
	known := false
	for _, c := range configs {
		known = known || string(w.config) == string(c)
	}
	if !known && sc.kind != "stage" {
		fail("config.json is neither version's bytes", "%q", w.config)
	}
	linksAt := func(v, why string) {
		if w.at() != v {
			fail(why+" but the links do not point at "+v, "lib -> %s, share -> %s", w.lib, w.share)
		}
	}
	configAt := func(v, why string) {
		if c, ok := configs[v]; ok && string(w.config) != string(c) {
			fail(why+" but config.json is not "+v+"'s", "%q", w.config)
		}
	}
	archiveOK := func(path, why string) {
		if err := readArchive(path); err != nil {
			fail(why+" but the archive does not read through", "%s: %v", f.norm(path), err)
		}
	}
	kind := map[string]string{"run": "upgrade", "abort": "upgrade"}[sc.kind]
	if kind == "" {
		kind = sc.kind
	}
	r, ok := lastRun(runs, kind)
	if !ok {
		return
	}
	if b := r.Facts["backup"]; b != "" {
		archiveOK(b, "the journal names the backup "+filepath.Base(b))
	}
	if b := r.Facts["kept"]; b != "" {
		archiveOK(b, "the journal names the kept state "+filepath.Base(b))
	}
	finished := false
	for _, e := range r.Events {
		finished = finished || (e.Stage == "finish" && e.State == journal.Done)
	}
	run := fmt.Sprintf("the journal says run %d %s", r.ID, r.Outcome)
	switch r.Outcome {
	case journal.Succeeded:
		finished = true
		switch kind {
		case "upgrade", "sync":
			linksAt(r.To, run)
			configAt(r.To, run)
		case "restore":
			sc.checkRestored(f, fail, archive, run)
		case "stage":
			sc.checkStaged(f, fail, run)
		case "prune":
			sc.checkPruned(f, fail, run)
		}
	case journal.RolledBack, journal.Aborted:
		// The run is recorded ended before its intent is removed: the intent may be there.
		finished = true
		linksAt(r.From, run)
		configAt(r.From, run)
	case journal.Running:
	default:
		return
	}
	forward := r.Travel == journal.Forward
	for _, stage := range stagesOf(r) {
		e, _ := r.LastEvent(stage)
		why := fmt.Sprintf("the journal says %s %s", stage, e.State)
		// A batch switches the master's links only when the master is one of its nodes.
		master := !strings.HasPrefix(stage, "batch-") || len(e.Nodes) == 0 ||
			slices.ContainsFunc(e.Nodes, func(n journal.NodeResult) bool { return n.Node == f.master })
		switch {
		case e.State == journal.Done && forward && (stage == "switch" || strings.HasPrefix(stage, "batch-")):
			if kind == "upgrade" && master {
				linksAt(r.To, why)
			}
		case e.State == journal.Undone && (stage == "switch" || strings.HasPrefix(stage, "batch-")):
			if master {
				linksAt(r.From, why)
			}
		case e.State == journal.Done && forward && (stage == "config-upgrade" || stage == "config-downgrade"):
			configAt(r.To, why)
		case e.State == journal.Done && stage == "intent" && !finished:
			if !w.intent {
				fail(why+" but the intent is gone", "%s", "state/intent.json is missing")
			}
		case e.State == journal.Undone && stage == "intent":
			if w.intent {
				fail(why+" but the intent is back", "%s", "state/intent.json exists")
			}
		case e.State == journal.Done && stage == "restore":
			sc.checkRestored(f, fail, archive, why)
		case e.State == journal.Done && stage == "place":
			sc.checkStaged(f, fail, why)
		case e.State == journal.Done && stage == "redistribute":
			configAt(r.To, why)
		case e.State == journal.Done && stage == "remove" && kind == "prune":
			sc.checkPruned(f, fail, why)
		}
	}
}

// stagesOf lists the stages of a run's events, each once, in order.
func stagesOf(r journal.Run) []string {
	var out []string
	for _, e := range r.Events {
		if !slices.Contains(out, e.Stage) {
			out = append(out, e.Stage)
		}
	}
	return out
}

// checkRestored checks that the state is the archive's.
func (sc crashScenario) checkRestored(f *crashFixture, fail func(what, format string, args ...any), archive map[string]string, why string) {
	end, _ := withoutTemps(f.tree())
	if d := treeDiff(end, archive); len(d) > 0 {
		fail(why+" but the state is not the archive's", "%s", strings.Join(d, "; "))
	}
}

// checkStaged checks that both trees of the staged version are in place, as the source holds
// them.
func (sc crashScenario) checkStaged(f *crashFixture, fail func(what, format string, args ...any), why string) {
	for _, dir := range []string{"usr/lib/app/" + sc.to, "usr/share/app/" + sc.to} {
		got, err1 := staging.ReadTree(f.path(dir))
		want, err2 := staging.ReadTree(f.path("src" + f.path(dir)))
		if err := errors.Join(err1, err2); err != nil || !got.Equal(want) {
			fail(why+" but a staged tree is not the source's", "%s (%v)", dir, err)
		}
	}
}

// readArchive reads a backup archive through: gzip and tar to their ends.
func readArchive(path string) error {
	fh, err := os.Open(path)
	if err != nil {
		return err
	}
	defer fh.Close()
	gz, err := gzip.NewReader(fh)
	if err != nil {
		return err
	}
	tr := tar.NewReader(gz)
	for {
		if _, err := tr.Next(); err == io.EOF {
			break
		} else if err != nil {
			return err
		}
		if _, err := io.Copy(io.Discard, tr); err != nil {
			return err
		}
	}
	_, err = io.Copy(io.Discard, gz)
	return err
}

// TestPointSpread: the spread of an upgrade's points holds every stage's end and every
// kind of point once, and is a fraction of them.
func TestPointSpread(t *testing.T) {
	points := []string{
		"1 journal: create run 1",
		"2 journal: preflight started",
		"3 vm: command started: verify",
		"4 vm: command finished: verify",
		"5 journal: preflight done",
		"6 journal: switch started",
		"7 node2: symlink $ROOT/etc/app/.lib.cutover-X",
		"8 node2: rename $ROOT/etc/app/.lib.cutover-X to $ROOT/etc/app/lib",
		"9 vm: symlink $ROOT/etc/app/.lib.cutover-Y",
		"10 vm: rename $ROOT/etc/app/.lib.cutover-Y to $ROOT/etc/app/lib",
		"11 journal: switch done",
		"12 config: migrated $ROOT/var/lib/app/config.json",
		"13 journal: facts map[a:b]",
		"14 journal: facts map[c:d]",
		"15 intent written",
		"16 intent removed",
		"17 journal: finish done",
	}
	got := pointSpread(points)
	want := []int{1, 2, 3, 4, 5, 7, 8, 11, 12, 13, 15, 16, 17}
	if !slices.Equal(got, want) {
		t.Errorf("pointSpread() = %v, want %v", got, want)
	}
	for _, c := range []struct{ desc, kind, stage string }{
		{"journal: config-upgrade done", "journal: done", "config-upgrade"},
		{"journal: travel rolling-back", "journal: travel", ""},
		{"journal: past the point of no return: true", "journal: past", ""},
		{"node2: write $ROOT/var/lib/app/config.json", "write", ""},
		{"restore: renamed $ROOT/etc/app/lib", "restore: renamed", ""},
		{"backup written", "backup written", ""},
	} {
		if kind, stage := pointKind(c.desc); kind != c.kind || stage != c.stage {
			t.Errorf("pointKind(%q) = %q, %q, want %q, %q", c.desc, kind, stage, c.kind, c.stage)
		}
	}
}

// TestFlagsSpread checks which points of a flags-set scenario make test kills cutover at:
// the spread, every command on the queue or the reconciler, every record of a stage that
// reads or changes the flags, and every record of the run's way.
func TestFlagsSpread(t *testing.T) {
	points := []string{
		"1 journal: create run 1",
		"2 journal: preflight started",
		"3 journal: preflight done",
		"4 node1: command started: : queue_drain; touch $ROOT/run/drained",
		"5 node1: command finished: : queue_drain; touch $ROOT/run/drained",
		"6 journal: drain done",
		"7 node1: command started: : daemons_stop; sleep 1",
		"8 node1: command finished: : daemons_stop; sleep 1",
		"9 node1: command started: : daemons_start; echo running",
		"10 node1: command finished: : daemons_start; echo running",
		"11 journal: stop-all done",
		"12 journal: past the point of no return: true",
		"13 node1: command started: : reconciler_continue; rm -f $ROOT/run/paused",
		"14 node1: command finished: : reconciler_continue; rm -f $ROOT/run/paused",
		"15 journal: undrain started",
		"16 journal: undrain done",
		"17 journal: travel rolling-back",
		"18 journal: finish done",
	}
	got := flagsSpread(points)
	want := []int{1, 2, 3, 4, 5, 6, 11, 12, 13, 14, 15, 16, 17, 18}
	if !slices.Equal(got, want) {
		t.Errorf("flagsSpread() = %v, want %v", got, want)
	}
}

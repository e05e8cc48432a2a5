package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/cutover/cutover/upgrade"
	"github.com/cutover/cutover/upgrade/atomicfile"
	"github.com/cutover/cutover/upgrade/timeline"
)

// defaultWidth is the width a timeline is drawn to when the output is no terminal and
// $COLUMNS says nothing.
const defaultWidth = 100

// printTimeline draws a run's timeline for the terminal, to its width, every string of the
// journal escaped.
func printTimeline(w io.Writer, r upgrade.RunReport, tl *timeline.Timeline) error {
	tl.Title = timelineTitle(r)
	return timeline.WriteText(termSafe{w}, tl, timeline.TextOptions{Width: terminalWidth(w), Escape: upgrade.EscapeControls})
}

// timelineTitle names the run a timeline draws, as `cutover journal RUN` does.
func timelineTitle(r upgrade.RunReport) string {
	return fmt.Sprintf("run %d: %s (%s): %s", r.ID, runTitle(r.Kind, r.From, r.To), textDash(r.Direction), journalOutcome(r))
}

// terminalWidth is the width of the terminal w writes to; for output that is no terminal,
// $COLUMNS, else defaultWidth.
func terminalWidth(w io.Writer) int {
	for {
		ts, ok := w.(termSafe)
		if !ok {
			break
		}
		w = ts.w
	}
	if f, ok := w.(*os.File); ok {
		if ws, err := unix.IoctlGetWinsize(int(f.Fd()), unix.TIOCGWINSZ); err == nil && ws.Col > 0 {
			return int(ws.Col)
		}
	}
	if n, err := strconv.Atoi(os.Getenv("COLUMNS")); err == nil && n > 0 && n <= 1000 {
		return n
	}
	return defaultWidth
}

// writeTimelineHTML writes the timeline of the run rep holds to path as an HTML page and says
// so on out.
func writeTimelineHTML(out io.Writer, path string, rep *upgrade.JournalReport) error {
	tl := rep.Timeline
	tl.Title = timelineTitle(rep.Runs[0])
	var page bytes.Buffer
	if err := timeline.WriteHTML(&page, tl, timeline.HTMLOptions{Escape: upgrade.EscapeControls}); err != nil {
		return fmt.Errorf("timeline of run %d: %w", rep.Runs[0].ID, err)
	}
	if err := writePage(path, page.Bytes()); err != nil {
		return err
	}
	fmt.Fprintf(out, "timeline of run %d written to %s\n", rep.Runs[0].ID, path)
	return nil
}

// writePage puts data at path the way cutover writes the files others read (package
// atomicfile, docs/design.md §9): a temporary file of the same directory, mode 0600, synced,
// renamed into place and the directory synced. A link at path, or anything there but a regular
// file, is refused (a usage error), never followed.
func writePage(path string, data []byte) error {
	switch fi, err := os.Lstat(path); {
	case err == nil && fi.Mode()&fs.ModeSymlink != 0:
		return usagef("journal: --html %s is a symbolic link: refused, the page is never written through a link", path)
	case err == nil && !fi.Mode().IsRegular():
		return usagef("journal: --html %s is not a regular file: refused", path)
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("write the timeline page %s: %w", path, err)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return fmt.Errorf("write the timeline page %s: %w", path, err)
	}
	return atomicfile.Write("the timeline page", abs, data, 0o600, nil)
}

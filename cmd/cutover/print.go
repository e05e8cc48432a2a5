package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/cutover/cutover/upgrade"
)

// printer shows a run's events: one line per stage as text, or one JSON object per line.
type printer struct {
	mu      sync.Mutex
	out     io.Writer
	json    bool
	verbose bool
}

func newPrinter(c *cli.Context) *printer {
	return &printer{out: c.App.Writer, json: c.String("output") == "json", verbose: c.Bool("verbose")}
}

// Report prints one event.
func (p *printer) Report(e upgrade.Event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.json {
		_ = json.NewEncoder(p.out).Encode(e)
		return
	}
	switch e.Type {
	case "stage":
		if e.State == "started" {
			return
		}
		nodes := ""
		if e.Of > 0 {
			nodes = fmt.Sprintf("%d/%d nodes", e.OK, e.Of)
		}
		msg := e.Message
		if e.PONR && e.State == "ok" {
			msg += "  <- point of no return"
		}
		idx := fmt.Sprintf("%2d", e.Index)
		if e.Index == 0 {
			idx = " -"
		}
		fmt.Fprintf(p.out, "[%s/%d] %-18s %-8s %-12s %6s  %s\n", idx, e.Total, e.Stage, stateWord(e.State), nodes, seconds(e.Duration), firstLine(msg, e.State))
		p.nodeLines(e)
	case "undo":
		fmt.Fprintf(p.out, "        undo %-13s %s  %s\n", e.Stage, stateWord(e.State), firstLine(e.Message, e.State))
		p.nodeLines(e)
	case "run":
		fmt.Fprintln(p.out, e.Message)
	case "wait":
		fmt.Fprintf(p.out, "        %s\n", e.Message)
	case "warn":
		fmt.Fprintf(p.out, "warning: %s\n", e.Message)
	}
}

// nodeLines shows the failed nodes of a stage (every node with --verbose) and their stderr.
func (p *printer) nodeLines(e upgrade.Event) {
	for _, n := range e.Nodes {
		if n.OK && !p.verbose {
			continue
		}
		status := "ok"
		if !n.OK {
			status = strings.TrimPrefix(n.Error, n.Node+": ")
		}
		fmt.Fprintf(p.out, "  %s: %s\n", n.Node, status)
		if !n.OK && n.StderrTail != "" && !strings.Contains(n.Error, n.StderrTail) {
			fmt.Fprintf(p.out, "    stderr: %s\n", n.StderrTail)
		}
	}
}

// upgradeDone prints the end of an upgrade run.
func (p *printer) upgradeDone(res *upgrade.Result, err error, dryRun bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.json {
		e := map[string]any{"time": time.Now(), "type": "done", "exit": exitCode(err)}
		if res != nil {
			e["run"], e["from"], e["to"], e["backup"], e["log"] = res.Run, res.From, res.To, res.Backup, res.Log
			e["duration_ns"] = res.Duration
		}
		if err != nil {
			e["error"] = err.Error()
		}
		_ = json.NewEncoder(p.out).Encode(e)
		return
	}
	if res == nil {
		return
	}
	switch {
	case res.Nothing && res.To == "":
		// A resume without a pending run: it runs at every boot, and says nothing.
	case res.Nothing:
		fmt.Fprintf(p.out, "%s is already at %s on the master; nothing to do\n", res.App, res.To)
	case dryRun && err == nil:
		fmt.Fprintf(p.out, "dry run: %s %s -> %s (%s) would proceed on %d nodes; nothing was changed\n", res.App, res.From, res.To, res.Direction, res.Nodes)
	case err == nil:
		fmt.Fprintf(p.out, "done: %s %s on %d/%d nodes in %s", res.App, res.To, res.Nodes, res.Nodes+len(res.Offline), seconds(res.Duration))
		if res.Backup != "" {
			fmt.Fprintf(p.out, "; backup %s", res.Backup)
		}
		fmt.Fprintln(p.out)
		if len(res.Offline) > 0 {
			fmt.Fprintf(p.out, "offline nodes still at %s: %v; run 'cutover sync' for them when they are back\n", res.From, res.Offline)
		}
	default:
		p.failed(err, res.Log)
	}
}

// failed ends a failed run's output: that nothing changed, when the exit code says so, and
// where the run's log is.
func (p *printer) failed(err error, log string) {
	switch {
	case exitCode(err) == exitFailed && log != "":
		fmt.Fprintf(p.out, "nothing was changed. log: %s\n", log)
	case exitCode(err) == exitFailed:
		fmt.Fprintln(p.out, "nothing was changed.")
	case log != "":
		fmt.Fprintf(p.out, "log: %s\n", log)
	}
}

// abortDone prints the end of `upgrade --abort`.
func (p *printer) abortDone(res *upgrade.Result, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.json {
		e := map[string]any{"time": time.Now(), "type": "done", "exit": exitCode(err)}
		if res != nil {
			e["run"], e["from"], e["to"], e["log"] = res.Run, res.From, res.To, res.Log
		}
		if err != nil {
			e["error"] = err.Error()
		}
		_ = json.NewEncoder(p.out).Encode(e)
		return
	}
	switch {
	case res == nil:
	case res.Nothing:
		fmt.Fprintln(p.out, "no run is pending; nothing to abort")
	case err == nil:
		fmt.Fprintf(p.out, "aborted run %d: %s is back at %s on %d nodes\n", res.Run, res.App, res.From, res.Nodes)
	}
}

func stateWord(s string) string {
	switch s {
	case "failed", "undo-failed":
		return "FAILED"
	}
	return s
}

func seconds(d time.Duration) string {
	if d == 0 {
		return ""
	}
	return fmt.Sprintf("%.1fs", d.Seconds())
}

// firstLine keeps a failed stage's line short: the node lines below carry the details.
func firstLine(msg, state string) string {
	if state != "failed" && state != "undo-failed" {
		return msg
	}
	for i, r := range msg {
		if r == '\n' {
			return msg[:i] + " ..."
		}
	}
	return msg
}

package main

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/cutover/cutover/upgrade"
)

func syncCommand() *cli.Command {
	return &cli.Command{
		Name:      "sync",
		Usage:     "bring nodes that missed a run (offline, replaced) to the cluster's live version",
		UsageText: "cutover sync [--dry-run] NODE...",
		Description: "Brings each NODE to the version the master runs: stops its daemons, switches its links, runs\n" +
			"ensure-dirs, copies the application's config from the master (or runs redist_conf), starts its\n" +
			"daemons, then runs verify on the master. The master and the other nodes are not touched.\n" +
			"Every NODE must be in the node list and not the master; a node marked offline may be named:\n" +
			"clear its offline flag afterwards so that runs include it again. The switch is the point of no\n" +
			"return: a failure before it starts the daemons again, a failure after it exits 3; then fix the\n" +
			"cause and run the same sync again. Refused while a run is pending.\n\n" + exitCodesHelp,
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "dry-run", Usage: "run the checks and show what would be done; change nothing"},
		},
		Action: func(c *cli.Context) error {
			names := c.Args().Slice()
			if len(names) == 0 {
				return usagef("sync needs at least one NODE; see 'cutover sync --help'")
			}
			for _, n := range names {
				if strings.HasPrefix(n, "-") {
					return usagef("sync: %q after a node name: flags go before the node names", n)
				}
			}
			cfg, err := loadConfig(c)
			if err != nil {
				return err
			}
			p := newPrinter(c)
			dryRun := c.Bool("dry-run")
			res, err := upgrade.Sync(c.Context, cfg, names, upgrade.SyncOptions{DryRun: dryRun, Reporter: p})
			p.syncDone(res, err, dryRun)
			return err
		},
	}
}

// syncDoneEvent is the last JSON line of `cutover sync`.
type syncDoneEvent struct {
	Time     time.Time       `json:"time"`
	Type     string          `json:"type"`
	Exit     int             `json:"exit"`
	DryRun   bool            `json:"dry_run,omitempty"`
	Run      uint64          `json:"run,omitempty"`
	To       string          `json:"to,omitempty"`
	Nodes    []syncNodeEntry `json:"nodes,omitempty"`
	Log      string          `json:"log,omitempty"`
	Duration time.Duration   `json:"duration_ns,omitempty"`
	Error    string          `json:"error,omitempty"`
}

type syncNodeEntry struct {
	Name    string `json:"name"`
	From    string `json:"from"`
	Offline bool   `json:"offline"`
}

// syncDone prints the end of a sync.
func (p *printer) syncDone(res *upgrade.SyncResult, err error, dryRun bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.json {
		e := syncDoneEvent{Time: time.Now(), Type: "done", Exit: exitCode(err), DryRun: dryRun}
		if res != nil {
			e.Run, e.To, e.Log, e.Duration = res.Run, res.To, res.Log, res.Duration
			for _, n := range res.Nodes {
				e.Nodes = append(e.Nodes, syncNodeEntry{Name: n.Name, From: n.From, Offline: n.Offline})
			}
		}
		if err != nil {
			e.Error = err.Error()
		}
		_ = json.NewEncoder(p.out).Encode(e)
		return
	}
	if res == nil {
		return
	}
	var names []string
	for _, n := range res.Nodes {
		names = append(names, fmt.Sprintf("%s (at %s)", n.Name, n.From))
	}
	switch {
	case dryRun && err == nil:
		fmt.Fprintf(p.out, "dry run: %s would be brought to %s %s; nothing was changed\n", strings.Join(names, ", "), res.App, res.To)
	case err == nil:
		fmt.Fprintf(p.out, "done: %s %s on %s in %s\n", res.App, res.To, nodeNames(res.Nodes), seconds(res.Duration))
	default:
		p.failed(err, res.Log)
	}
}

func nodeNames(list []upgrade.SyncNode) string {
	var names []string
	for _, n := range list {
		names = append(names, n.Name)
	}
	return strings.Join(names, ", ")
}

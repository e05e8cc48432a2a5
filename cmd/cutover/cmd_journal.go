package main

import (
	"flag"
	"io"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/cutover/cutover/upgrade"
)

func journalCommand() *cli.Command {
	return &cli.Command{
		Name:         "journal",
		OnUsageError: journalUsageError,
		Usage:        "show past runs, or one run's stages, durations and per-node results, or its timeline",
		UsageText:    "cutover journal [--timeline [--html=FILE]] [RUN]",
		Description: "Without RUN, lists every run in the journal, oldest first: its id, kind, versions, direction,\n" +
			"start, duration, outcome and the nodes it skipped as offline. With RUN, shows that run's stage\n" +
			"transitions in order, each with its state, duration and every node's result (exit code, error,\n" +
			"the tail of its stderr), and the facts the run learned. With --timeline, draws the run instead:\n" +
			"one row per node, one bar per stage (stop, switch, config, start, restart, verify) on one time\n" +
			"axis, each node's downtime and the cluster's downtime window marked, a rolling run's batches\n" +
			"above their nodes; it fits the terminal's width ($COLUMNS when the output is no terminal). With\n" +
			"--html=FILE it writes the same picture to FILE as a self-contained HTML page instead (no\n" +
			"script, nothing loaded from the network), with each bar's stage and times on hover and the same\n" +
			"as tables for screen readers; FILE is replaced atomically, never through a link, and created\n" +
			"0600. The flags may also follow RUN. It only reads the journal: it works during a run. A run id\n" +
			"that is malformed or not in the journal is refused with exit code 2.",
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "timeline", Usage: "draw the run's timeline: one row per node, one bar per stage, the downtime window"},
			&cli.StringFlag{Name: "html", Usage: "with --timeline, write the timeline as an HTML page to `FILE`"},
		},
		Action: func(c *cli.Context) error {
			args, err := journalArgsOf(c)
			if err != nil {
				return err
			}
			cfg, err := loadConfig(c)
			if err != nil {
				return err
			}
			rep, err := upgrade.ReadJournal(c.Context, cfg, upgrade.JournalOptions{Run: args.run, Timeline: args.timeline})
			if err != nil {
				return err
			}
			if args.html != "" {
				return writeTimelineHTML(c.App.Writer, args.html, rep)
			}
			var out journalOutput = newOutput(c)
			return out.journal(rep)
		},
	}
}

// journalArgs are what `cutover journal` was asked for.
type journalArgs struct {
	run      string
	timeline bool
	html     string
}

// journalArgs reads the command's run id and flags, the flags before the run id or after it
// ("cutover journal 3 --timeline"), and refuses what does not go together.
func journalArgsOf(c *cli.Context) (journalArgs, error) {
	a := journalArgs{run: c.Args().First(), timeline: c.Bool("timeline"), html: c.String("html")}
	if rest := c.Args().Tail(); len(rest) > 0 {
		fs := flag.NewFlagSet("journal", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		fs.BoolVar(&a.timeline, "timeline", a.timeline, "")
		fs.StringVar(&a.html, "html", a.html, "")
		if err := fs.Parse(rest); err != nil {
			return a, usagef("journal: %v", err)
		}
		if fs.NArg() > 0 {
			return a, usagef("journal takes at most one run id, got %d arguments", c.NArg())
		}
	}
	switch {
	case strings.HasPrefix(a.run, "-"):
		return a, usagef("journal: %q is not a run id", a.run)
	case a.html != "" && !a.timeline:
		return a, usagef("journal: --html writes a timeline: add --timeline")
	case a.timeline && a.run == "":
		return a, usagef("journal: --timeline draws one run: name it ('cutover journal --timeline RUN')")
	case a.timeline && globalString(c, "output") == "json":
		return a, usagef("journal: --timeline draws a picture; '--output json journal RUN' has the same times as data")
	}
	return a, nil
}

// journalUsageError makes a flag the command does not know, such as "-1", a usage error.
func journalUsageError(_ *cli.Context, err error, _ bool) error {
	return usagef("%v", err)
}

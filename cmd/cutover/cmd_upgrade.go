package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/urfave/cli/v2"
	"golang.org/x/sys/unix"

	"github.com/cutover/cutover/upgrade"
)

func upgradeCommand() *cli.Command {
	return &cli.Command{
		Name:      "upgrade",
		Usage:     "switch the cluster up or down to a version",
		UsageText: "cutover upgrade --to=VERSION [--dry-run] [--yes] [--force=CHECK ...] [--watch=DURATION]\n   cutover upgrade --downgrade [--dry-run] [--yes] [--watch=DURATION]\n   cutover upgrade --resume [--skip-node=NODE ...]\n   cutover upgrade --abort [--skip-node=NODE ...]",
		Description: "Checks that VERSION is installed on every online node, then drains the queue, stops the daemons,\n" +
			"backs up the state, switches the links and migrates the config, starts everything again and verifies.\n" +
			"On a terminal it shows the plan and asks before changing anything; without one, --yes is required.\n\n" + exitCodesHelp,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "to", Usage: "the `VERSION` to switch to"},
			&cli.BoolFlag{Name: "dry-run", Usage: "run the checks and show what would be done; change nothing"},
			&cli.BoolFlag{Name: "yes", Aliases: []string{"y"}, Usage: "do not ask for confirmation"},
			&cli.StringSliceFlag{Name: "force", Usage: "override a skippable `CHECK` (" + strings.Join(upgrade.Forceable, ", ") + ")"},
			&cli.BoolFlag{Name: "resume", Usage: "continue an interrupted run; without one, do nothing. The package runs it at boot: cutover-resume.service where systemd runs, the @reboot line of /etc/cron.d/cutover elsewhere"},
			&cli.BoolFlag{Name: "abort", Usage: "undo an interrupted run that is before its point of no return, or end the watch of a finished run early (the run is then done)"},
			&cli.BoolFlag{Name: "downgrade", Usage: "go back to the version the cluster ran before its last done upgrade (the previous minor), as --to would"},
			&cli.StringFlag{Name: "watch", Usage: "with --to or --downgrade: watch the cluster for `DURATION` after the finish before the run is done (the verify and the wrong-version check every [policy] watch_interval); 0 turns the watch off; default [policy] watch"},
			&cli.StringSliceFlag{Name: "skip-node", Usage: "with --resume or --abort: declare `NODE` gone for the rest of the pending run (journaled); 'cutover sync NODE' catches it up later"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return usagef("upgrade takes no arguments, got %q", c.Args().First())
			}
			modes := 0
			for _, f := range []string{"to", "resume", "abort", "downgrade"} {
				if c.IsSet(f) {
					modes++
				}
			}
			if modes != 1 {
				return usagef("upgrade needs exactly one of --to=VERSION, --downgrade, --resume and --abort")
			}
			if c.IsSet("skip-node") && (c.IsSet("to") || c.IsSet("downgrade")) {
				return usagef("--skip-node goes with --resume or --abort, not --to or --downgrade")
			}
			if c.IsSet("watch") && !c.IsSet("to") && !c.IsSet("downgrade") {
				return usagef("--watch goes with --to or --downgrade: a pending run keeps the watch it began with")
			}
			var watch *time.Duration
			if c.IsSet("watch") {
				d, err := time.ParseDuration(c.String("watch"))
				if err != nil || d < 0 {
					return usagef("--watch=%q: not a duration such as \"15m\" or \"0\" (no watch)", c.String("watch"))
				}
				watch = &d
			}
			cfg, err := loadConfig(c)
			if err != nil {
				return err
			}
			var out upgradeOutput = newOutput(c)
			switch {
			case c.Bool("resume"):
				res, err := upgrade.Resume(c.Context, cfg, upgrade.ResumeOptions{Reporter: out, SkipNodes: c.StringSlice("skip-node")})
				out.upgradeDone(res, err, false)
				return err
			case c.Bool("abort"):
				res, err := upgrade.Abort(c.Context, cfg, upgrade.AbortOptions{Reporter: out, SkipNodes: c.StringSlice("skip-node")})
				out.abortDone(res, err)
				return err
			}
			to := c.String("to")
			if c.Bool("downgrade") {
				if to, err = upgrade.DowngradeTarget(c.Context, cfg); err != nil {
					return err
				}
			}
			opts := upgrade.Options{
				To: to, Force: c.StringSlice("force"), DryRun: c.Bool("dry-run"), Reporter: out, Watch: watch,
			}
			opts.Confirm = confirmation(c, "upgrade", opts.DryRun)
			res, err := upgrade.Upgrade(c.Context, cfg, opts)
			out.upgradeDone(res, err, opts.DryRun)
			return err
		},
	}
}

// confirm shows what the run will do and asks the operator. SIGINT or SIGTERM at the
// question (ctx is cancelled) answers no at once, without waiting for Enter.
func confirm(ctx context.Context, in io.Reader, out io.Writer, r *upgrade.Run) error {
	if r.Kind == upgrade.KindUpgrade || r.Title() == "" {
		fmt.Fprintf(out, "%s %s -> %s (%s) on %s (master %s", r.Config.App, r.From, r.To, r.Direction, count(len(r.Online), "node"), r.Inventory.Master)
		if len(r.Offline) > 0 {
			var names []string
			for _, n := range r.Offline {
				names = append(names, n.Name)
			}
			fmt.Fprintf(out, ", offline: %s", strings.Join(names, ", "))
		}
		fmt.Fprintln(out, ")")
	} else {
		fmt.Fprintln(out, r.Title())
	}
	for _, d := range r.Details() {
		fmt.Fprintf(out, "  %s\n", d)
	}
	for _, st := range r.StagePlan() {
		where := st.Where
		switch {
		case st.Skipped:
			where = "skipped"
		case len(st.Nodes) > 0 && st.Where != "master":
			where = fmt.Sprintf("%s (%s)", st.Where, count(len(st.Nodes), "node"))
		}
		mark := ""
		if st.PONR {
			mark = "  <- point of no return"
		}
		fmt.Fprintf(out, "  %2d. %-18s %s%s\n", st.Index, st.Name, where, mark)
	}
	fmt.Fprint(out, "proceed? [y/N] ")
	answer := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(in).ReadString('\n')
		answer <- line
	}()
	var line string
	select {
	case line = <-answer:
	case <-ctx.Done():
		fmt.Fprintln(out)
		return fmt.Errorf("interrupted at the question: nothing was changed")
	}
	switch strings.ToLower(strings.TrimSpace(line)) {
	case "y", "yes":
		return nil
	}
	return fmt.Errorf("not confirmed: nothing was changed")
}

// confirmation returns how a command that changes the cluster asks the operator: nil with
// --yes or --dry-run, and otherwise the question, asked once the run's input was validated and
// its checks passed, before anything changes. Where there is no terminal to ask on, the answer
// is a usage error, so that bad input is refused as such first, whoever would have confirmed.
func confirmation(c *cli.Context, what string, dryRun bool) func(context.Context, *upgrade.Run) error {
	if dryRun || c.Bool("yes") {
		return nil
	}
	return func(ctx context.Context, r *upgrade.Run) error {
		if !isTerminal(c.App.Reader) {
			return usagef("not on a terminal: pass --yes to %s without confirmation", what)
		}
		return confirm(ctx, c.App.Reader, c.App.Writer, r)
	}
}

// isTerminal reports whether r is a terminal, such as the operator's.
func isTerminal(r io.Reader) bool {
	f, ok := r.(*os.File)
	if !ok {
		return false
	}
	// A terminal answers the terminal's own ioctl; /dev/null and other character devices
	// do not, though they are character devices too.
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}

package main

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"github.com/cutover/cutover/upgrade"
)

func statusCommand() *cli.Command {
	return &cli.Command{
		Name:      "status",
		Usage:     "show every node's links and installed versions, and the run in progress",
		UsageText: "cutover status [--no-verify]",
		Description: "Reads every node: where its two links point, which versions are installed, and whether it can be\n" +
			"reached; what the application's verify command says; the pending run and its current stage; who holds\n" +
			"the run lock; and the nodes that are behind the cluster's version, with the command that catches\n" +
			"them up. It changes nothing and never waits for the run lock, so it answers while a run is going\n" +
			"(verify is not run then). It also says how the master finishes an interrupted run at boot, and warns when\n" +
			"nothing does. Unreachable nodes are shown, not an error: it exits 0 unless the\n" +
			"configuration is bad.\n\n" +
			"With [metrics] textfile set, it also rewrites that file (node_exporter's textfile collector) with the\n" +
			"metrics of what it read (metrics.md). --output prometheus prints the same metrics, in Prometheus's\n" +
			"text format, instead of the status, for a user who scrapes them another way.\n\n" + exitCodesHelp,
		Flags: []cli.Flag{
			&cli.BoolFlag{Name: "no-verify", Usage: "do not run the application's verify command"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return usagef("status takes no arguments, got %q", c.Args().First())
			}
			cfg, err := loadConfig(c)
			if err != nil {
				return err
			}
			st, err := upgrade.Status(c.Context, cfg, upgrade.StatusOptions{NoVerify: c.Bool("no-verify")})
			if err != nil {
				return err
			}
			if globalString(c, "output") == "prometheus" {
				for _, p := range st.Problems {
					fmt.Fprintf(c.App.ErrWriter, "cutover: warning: %s\n", upgrade.EscapeControls(p))
				}
				_, err := c.App.Writer.Write(st.Metrics)
				return err
			}
			var out statusOutput = newOutput(c)
			return out.status(st)
		},
	}
}

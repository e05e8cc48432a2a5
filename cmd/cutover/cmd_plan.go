package main

import (
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/cutover/cutover/upgrade"
)

func planCommand() *cli.Command {
	return &cli.Command{
		Name:      "plan",
		Usage:     "show everything upgrade would check and do; change nothing",
		UsageText: "cutover plan --to=VERSION [--force=CHECK ...]",
		Description: "Runs every check 'cutover upgrade --to=VERSION' would run, on every node, and lists the stages it\n" +
			"would execute with their nodes and the point of no return, and the config's migration steps, one per\n" +
			"minor version, warning about files in the version's cutover/ directory that it does not read. Unlike\n" +
			"a run it does not stop at the first refusal: every refusal is listed. It changes nothing: no lock,\n" +
			"journal, intent or log is written.\n" +
			"Exits 0 when the run would proceed and 1 when a check refuses it.\n\n" + exitCodesHelp,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "to", Usage: "the `VERSION` to plan a switch to"},
			&cli.StringSliceFlag{Name: "force", Usage: "override a skippable `CHECK` as upgrade would (" + strings.Join(upgrade.Forceable, ", ") + ")"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return usagef("plan takes no arguments, got %q", c.Args().First())
			}
			if !c.IsSet("to") {
				return usagef("plan needs --to=VERSION")
			}
			cfg, err := loadConfig(c)
			if err != nil {
				return err
			}
			p, err := upgrade.Plan(c.Context, cfg, upgrade.PlanOptions{To: c.String("to"), Force: c.StringSlice("force")})
			if err != nil {
				return err
			}
			var out planOutput = newOutput(c)
			if err := out.plan(p); err != nil {
				return err
			}
			if !p.Proceed {
				return fmt.Errorf("the switch to %s would be refused: %s", p.To, count(len(p.Refusals), "refusal"))
			}
			return nil
		},
	}
}

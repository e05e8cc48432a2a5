package main

import (
	"fmt"
	"io"
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
			"would execute with their nodes and the point of no return. Unlike a run it does not stop at the first\n" +
			"refusal: every refusal is listed. It changes nothing: no lock, journal, intent or log is written.\n" +
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
			if c.String("output") == "json" {
				if err := writeDoc(c.App.Writer, planJSON(p)); err != nil {
					return err
				}
			} else {
				printPlan(c.App.Writer, p, c.Bool("verbose"))
			}
			if !p.Proceed {
				return fmt.Errorf("the switch to %s would be refused: %s", p.To, textCount(len(p.Refusals), "refusal"))
			}
			return nil
		},
	}
}

// printPlan shows a plan as text: the checks, the stages, and the verdict.
func printPlan(w io.Writer, p *upgrade.PlanReport, verbose bool) {
	from, dir := p.From, string(p.Direction)
	if from == "" {
		from, dir = "?", "version unknown"
	}
	fmt.Fprintf(w, "plan: %s %s -> %s (%s) on %s (master %s, offline: %s)\n",
		p.App, from, p.To, dir, textCount(len(p.Nodes), "node"), p.Master, textNone(p.Offline))

	fmt.Fprintln(w, "\nchecks")
	var rows [][]string
	for _, c := range p.Checks {
		verdict := "ok"
		switch {
		case !c.OK:
			verdict = "REFUSED"
		case c.Warning:
			verdict = "warning"
		}
		rows = append(rows, []string{verdict, c.Name, textDash(c.Node), textOneLine(c.Message)})
	}
	writeTable(w, rows)

	if len(p.Stages) > 0 {
		fmt.Fprintln(w, "\nstages")
		rows = nil
		for _, s := range p.Stages {
			where, on := s.Where, textDash(nodeList(s.Nodes, verbose))
			if s.Skipped {
				where, on = "skipped", ""
			}
			if s.PONR {
				on += "  <- point of no return"
			}
			rows = append(rows, []string{fmt.Sprintf("[%2d/%d]", s.Index, len(p.Stages)), s.Name, where, on})
		}
		writeTable(w, rows)
	}

	fmt.Fprintln(w)
	switch {
	case !p.Proceed:
		fmt.Fprintf(w, "refused: %s; nothing was changed\n", textCount(len(p.Refusals), "refusal"))
		for _, r := range p.Refusals {
			fmt.Fprintf(w, "  %s\n", textOneLine(r))
		}
	case p.Nothing:
		fmt.Fprintf(w, "nothing to do: %s already runs %s\n", p.App, p.To)
	default:
		fmt.Fprintf(w, "would proceed: 'cutover upgrade --to=%s' runs these stages\n", p.To)
	}
}

// planDoc is the JSON form of a plan: `cutover --output json plan`.
type planDoc struct {
	APIVersion string         `json:"apiVersion"`
	Kind       string         `json:"kind"`
	App        string         `json:"app"`
	From       string         `json:"from"`
	To         string         `json:"to"`
	Direction  string         `json:"direction"`
	Master     string         `json:"master"`
	Nodes      []string       `json:"nodes"`
	Offline    []string       `json:"offline"`
	Checks     []planCheckDoc `json:"checks"`
	Stages     []planStageDoc `json:"stages"`
	Nothing    bool           `json:"nothing"`
	Proceed    bool           `json:"proceed"`
	Refusals   []string       `json:"refusals"`
}

type planCheckDoc struct {
	Name    string `json:"name"`
	Node    string `json:"node"`
	OK      bool   `json:"ok"`
	Warning bool   `json:"warning"`
	Message string `json:"message"`
}

type planStageDoc struct {
	Index   int      `json:"index"`
	Name    string   `json:"name"`
	Where   string   `json:"where"`
	Nodes   []string `json:"nodes"`
	Skipped bool     `json:"skipped"`
	PONR    bool     `json:"ponr"`
}

func planJSON(p *upgrade.PlanReport) planDoc {
	d := planDoc{
		APIVersion: docAPIVersion, Kind: "Plan",
		App: p.App, From: p.From, To: p.To, Direction: string(p.Direction), Master: p.Master,
		Nodes: docStrings(p.Nodes), Offline: docStrings(p.Offline),
		Checks: []planCheckDoc{}, Stages: []planStageDoc{},
		Nothing: p.Nothing, Proceed: p.Proceed, Refusals: docStrings(p.Refusals),
	}
	for _, c := range p.Checks {
		d.Checks = append(d.Checks, planCheckDoc{Name: c.Name, Node: c.Node, OK: c.OK, Warning: c.Warning, Message: c.Message})
	}
	for _, s := range p.Stages {
		d.Stages = append(d.Stages, planStageDoc{Index: s.Index, Name: s.Name, Where: s.Where, Nodes: docStrings(s.Nodes), Skipped: s.Skipped, PONR: s.PONR})
	}
	return d
}

// nodeList names the nodes of a stage; a long list is cut short unless verbose.
func nodeList(names []string, verbose bool) string {
	const shown = 6
	if len(names) <= shown || verbose {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s, ... (%d nodes)", strings.Join(names[:shown-1], ", "), len(names))
}

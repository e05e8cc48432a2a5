package main

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/cutover/cutover/upgrade"
)

// The text form of `cutover plan`.

// plan shows a plan: the checks, the stages, and the verdict.
func (o *textOutput) plan(p *upgrade.PlanReport) error {
	w, verbose := o.w, o.verbose
	from, dir := p.From, string(p.Direction)
	if from == "" {
		from, dir = "?", "version unknown"
	}
	fmt.Fprintf(w, "plan: %s %s -> %s (%s) on %s (master %s, offline: %s)\n",
		p.App, from, p.To, dir, count(len(p.Nodes), "node"), p.Master, textNone(p.Offline))

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

	if len(p.Migrations) > 0 {
		fmt.Fprintln(w, "\nconfig migrations")
		rows = nil
		for _, m := range p.Migrations {
			file, ops := "no file", "no change between "+m.From+" and "+m.To
			if m.File != "" {
				file, ops = filepath.Base(m.File), "no ops"
				if len(m.Ops) > 0 {
					ops = strings.Join(m.Ops, "; ")
				}
			}
			rows = append(rows, []string{m.From + " -> " + m.To, file, textOneLine(ops)})
		}
		writeTable(w, rows)
	}

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
		fmt.Fprintf(w, "refused: %s; nothing was changed\n", count(len(p.Refusals), "refusal"))
		for _, r := range p.Refusals {
			fmt.Fprintf(w, "  %s\n", textOneLine(r))
		}
	case p.Nothing:
		fmt.Fprintf(w, "nothing to do: %s already runs %s\n", p.App, p.To)
	default:
		fmt.Fprintf(w, "would proceed: 'cutover upgrade --to=%s' runs these stages\n", p.To)
	}
	return nil
}

// nodeList names the nodes of a stage; a long list is cut short unless verbose.
func nodeList(names []string, verbose bool) string {
	const shown = 6
	if len(names) <= shown || verbose {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s, ... (%d nodes)", strings.Join(names[:shown-1], ", "), len(names))
}

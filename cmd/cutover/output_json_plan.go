package main

import "github.com/cutover/cutover/upgrade"

// The JSON form of `cutover plan` (the convention is in output_json.go).

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
	Migrations []planStepDoc  `json:"migrations"`
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
	// NotInstalled marks a refusal because the target is not installed on the node.
	NotInstalled bool `json:"not_installed,omitempty"`
}

// planStepDoc is one minor hop of the config's migration; File is "" when no file describes
// it (the config does not change there).
type planStepDoc struct {
	From string   `json:"from"`
	To   string   `json:"to"`
	File string   `json:"file"`
	Ops  []string `json:"ops"`
}

type planStageDoc struct {
	Index   int      `json:"index"`
	Name    string   `json:"name"`
	Where   string   `json:"where"`
	Nodes   []string `json:"nodes"`
	Skipped bool     `json:"skipped"`
	PONR    bool     `json:"ponr"`
}

func (o *jsonOutput) plan(p *upgrade.PlanReport) error {
	d := planDoc{
		APIVersion: docAPIVersion, Kind: "Plan",
		App: p.App, From: p.From, To: p.To, Direction: string(p.Direction), Master: p.Master,
		Nodes: docStrings(p.Nodes), Offline: docStrings(p.Offline),
		Checks: []planCheckDoc{}, Migrations: []planStepDoc{}, Stages: []planStageDoc{},
		Nothing: p.Nothing, Proceed: p.Proceed, Refusals: docStrings(p.Refusals),
	}
	for _, c := range p.Checks {
		d.Checks = append(d.Checks, planCheckDoc{Name: c.Name, Node: c.Node, OK: c.OK, Warning: c.Warning, Message: c.Message, NotInstalled: c.NotInstalled})
	}
	for _, m := range p.Migrations {
		d.Migrations = append(d.Migrations, planStepDoc{From: m.From, To: m.To, File: m.File, Ops: docStrings(m.Ops)})
	}
	for _, s := range p.Stages {
		d.Stages = append(d.Stages, planStageDoc{Index: s.Index, Name: s.Name, Where: s.Where, Nodes: docStrings(s.Nodes), Skipped: s.Skipped, PONR: s.PONR})
	}
	return o.doc(d)
}

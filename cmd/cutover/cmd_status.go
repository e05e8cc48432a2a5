package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode/utf8"

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
			"(verify is not run then). Unreachable nodes are shown, not an error: it exits 0 unless the\n" +
			"configuration is bad.\n\n" + exitCodesHelp,
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
			if c.String("output") == "json" {
				return writeDoc(c.App.Writer, statusJSON(st))
			}
			printStatus(c.App.Writer, st)
			return nil
		},
	}
}

// printStatus shows the cluster's state as text: a header, one line per node, then verify,
// the pending run, the lock and the nodes behind.
func printStatus(w io.Writer, st *upgrade.StatusReport) {
	offline := []string{}
	for _, n := range st.Nodes {
		if n.Offline {
			offline = append(offline, n.Name)
		}
	}
	version := st.Version
	if version == "" {
		version = "version unknown"
	}
	fmt.Fprintf(w, "%s %s on %s (master %s, offline: %s)\n", st.App, version, textCount(len(st.Nodes), "node"), st.Master, textNone(offline))
	if st.VersionError != "" {
		fmt.Fprintf(w, "  %s: %s\n", st.Master, textOneLine(st.VersionError))
	}

	behind := map[string]bool{}
	for _, b := range st.Behind {
		behind[b.Node] = true
	}
	rows := [][]string{{"NODE", "STATE", "LIB", "SHARE", "INSTALLED", ""}}
	for _, n := range st.Nodes {
		state, note := "ok", n.Error
		switch {
		case !n.Reachable:
			state = "unreachable"
		case n.LinkError != "":
			state, note = "broken", n.LinkError
		case n.Error != "":
			state = "error"
		case behind[n.Name]:
			state = "behind"
		}
		if n.Offline {
			state += " (offline)"
		}
		installed := ""
		if n.Reachable {
			installed = strings.Join(n.Installed, " ")
		}
		rows = append(rows, []string{n.Name, state, textDash(n.Lib), textDash(n.Share), textDash(installed), textOneLine(note)})
	}
	writeTable(w, rows)

	if v := st.Verify; v != nil {
		switch {
		case !v.Ran:
			fmt.Fprintf(w, "verify: %s\n", v.Skipped)
		case v.OK:
			fmt.Fprintln(w, "verify: ok")
		case v.ExitCode > 0 && len(v.Output) > 0:
			// The output below says why.
			fmt.Fprintf(w, "verify: FAILED (exit %d)\n", v.ExitCode)
		default:
			fmt.Fprintf(w, "verify: FAILED: %s\n", textOneLine(v.Error))
		}
		for _, line := range v.Output {
			fmt.Fprintf(w, "  %s\n", line)
		}
	}

	if p := st.Pending; p != nil {
		fmt.Fprintf(w, "pending: run %d, %s %s -> %s", p.Run, textDash(p.Direction), p.From, p.To)
		if p.Stage != "" {
			fmt.Fprintf(w, ", at %s (%s %s)", p.Stage, p.State, textTime(p.At))
		}
		ponr := "before the point of no return"
		if p.PastPONR {
			ponr = "past the point of no return"
		}
		switch {
		case st.Lock != nil:
			fmt.Fprintf(w, ", %s; in progress\n", ponr)
		case p.PastPONR:
			fmt.Fprintf(w, ", %s; interrupted\n  finish it with 'cutover upgrade --resume'\n", ponr)
		default:
			fmt.Fprintf(w, ", %s; interrupted\n  continue it with 'cutover upgrade --resume' or undo it with 'cutover upgrade --abort'\n", ponr)
		}
		if p.Error != "" {
			fmt.Fprintf(w, "  journal: %s\n", textOneLine(p.Error))
		}
	} else {
		fmt.Fprint(w, "pending: none")
		if r := st.LastRun; r != nil {
			fmt.Fprintf(w, "; last run %d, %s %s -> %s: %s", r.Run, r.Kind, r.From, r.To, r.Outcome)
			if !r.Ended.IsZero() {
				fmt.Fprintf(w, " %s", textTime(r.Ended))
			}
		}
		fmt.Fprintln(w)
	}
	if h := st.Lock; h != nil {
		fmt.Fprintf(w, "lock: held by pid %d on %s since %s", h.PID, h.Host, textTime(h.Started))
		if h.Command != "" {
			fmt.Fprintf(w, " (%s)", h.Command)
		}
		fmt.Fprintln(w)
	}
	for _, b := range st.Behind {
		fmt.Fprintf(w, "behind: %s is at %s, the cluster at %s: run '%s'\n", b.Node, b.Version, st.Version, b.Command)
	}
	for _, p := range st.Problems {
		fmt.Fprintf(w, "warning: %s\n", textOneLine(p))
	}
}

// statusDoc is the JSON form of a status: `cutover --output json status`.
type statusDoc struct {
	APIVersion   string            `json:"apiVersion"`
	Kind         string            `json:"kind"`
	App          string            `json:"app"`
	Master       string            `json:"master"`
	Version      string            `json:"version"`
	VersionError string            `json:"version_error,omitempty"`
	Nodes        []statusNodeDoc   `json:"nodes"`
	Verify       *statusVerifyDoc  `json:"verify"`
	Pending      *statusPendingDoc `json:"pending"`
	Lock         *statusLockDoc    `json:"lock"`
	LastRun      *statusRunDoc     `json:"last_run"`
	Behind       []statusBehindDoc `json:"behind"`
	Problems     []string          `json:"problems"`
}

type statusNodeDoc struct {
	Name      string   `json:"name"`
	Address   string   `json:"address"`
	Offline   bool     `json:"offline"`
	Reachable bool     `json:"reachable"`
	Lib       string   `json:"lib"`
	Share     string   `json:"share"`
	Live      string   `json:"live"`
	LinkError string   `json:"link_error,omitempty"`
	Installed []string `json:"installed"`
	Error     string   `json:"error,omitempty"`
}

type statusVerifyDoc struct {
	Ran      bool     `json:"ran"`
	Skipped  string   `json:"skipped,omitempty"`
	OK       bool     `json:"ok"`
	ExitCode int      `json:"exit_code"`
	Output   []string `json:"output"`
	Error    string   `json:"error,omitempty"`
}

type statusPendingDoc struct {
	Run       uint64 `json:"run"`
	From      string `json:"from"`
	To        string `json:"to"`
	Direction string `json:"direction"`
	Created   string `json:"created"`
	Host      string `json:"host"`
	PID       int    `json:"pid"`
	Outcome   string `json:"outcome"`
	Stage     string `json:"stage"`
	State     string `json:"state"`
	At        string `json:"at,omitempty"`
	PastPONR  bool   `json:"past_ponr"`
	Error     string `json:"error,omitempty"`
}

type statusLockDoc struct {
	Host    string `json:"host"`
	PID     int    `json:"pid"`
	Started string `json:"started"`
	Command string `json:"command"`
}

type statusRunDoc struct {
	Run       uint64   `json:"run"`
	Kind      string   `json:"kind"`
	From      string   `json:"from"`
	To        string   `json:"to"`
	Outcome   string   `json:"outcome"`
	Started   string   `json:"started"`
	Ended     string   `json:"ended,omitempty"`
	LastStage string   `json:"last_stage"`
	LastState string   `json:"last_state"`
	Offline   []string `json:"offline"`
}

type statusBehindDoc struct {
	Node    string `json:"node"`
	Version string `json:"version"`
	Command string `json:"command"`
}

func statusJSON(st *upgrade.StatusReport) statusDoc {
	d := statusDoc{
		APIVersion: docAPIVersion, Kind: "Status",
		App: st.App, Master: st.Master, Version: st.Version, VersionError: st.VersionError,
		Nodes: []statusNodeDoc{}, Behind: []statusBehindDoc{}, Problems: docStrings(st.Problems),
	}
	for _, n := range st.Nodes {
		d.Nodes = append(d.Nodes, statusNodeDoc{
			Name: n.Name, Address: n.Address, Offline: n.Offline, Reachable: n.Reachable,
			Lib: n.Lib, Share: n.Share, Live: n.Live, LinkError: n.LinkError,
			Installed: docStrings(n.Installed), Error: n.Error,
		})
	}
	if v := st.Verify; v != nil {
		d.Verify = &statusVerifyDoc{Ran: v.Ran, Skipped: v.Skipped, OK: v.OK, ExitCode: v.ExitCode, Output: docStrings(v.Output), Error: v.Error}
	}
	if p := st.Pending; p != nil {
		d.Pending = &statusPendingDoc{
			Run: p.Run, From: p.From, To: p.To, Direction: p.Direction, Created: docTime(p.Created), Host: p.Host, PID: p.PID,
			Outcome: p.Outcome, Stage: p.Stage, State: p.State, At: docTime(p.At), PastPONR: p.PastPONR, Error: p.Error,
		}
	}
	if h := st.Lock; h != nil {
		d.Lock = &statusLockDoc{Host: h.Host, PID: h.PID, Started: docTime(h.Started), Command: h.Command}
	}
	if r := st.LastRun; r != nil {
		d.LastRun = &statusRunDoc{
			Run: r.Run, Kind: r.Kind, From: r.From, To: r.To, Outcome: r.Outcome, Started: docTime(r.Started), Ended: docTime(r.Ended),
			LastStage: r.LastStage, LastState: r.LastState, Offline: docStrings(r.Offline),
		}
	}
	for _, b := range st.Behind {
		d.Behind = append(d.Behind, statusBehindDoc{Node: b.Node, Version: b.Version, Command: b.Command})
	}
	return d
}

// docAPIVersion is the apiVersion of the JSON documents plan and status print.
const docAPIVersion = "cutover/v1"

// writeDoc prints one JSON document, indented.
func writeDoc(w io.Writer, doc any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(doc)
}

// docStrings keeps a list a list in JSON: nil becomes [], not null.
func docStrings(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// docTime formats a time for JSON documents: RFC 3339 in UTC, "" for none.
func docTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339Nano)
}

// textTime formats a time for text output: RFC 3339 in UTC to the second, "-" for none.
func textTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

// textCount says "1 node", "4 nodes".
func textCount(n int, noun string) string {
	if n == 1 {
		return fmt.Sprintf("1 %s", noun)
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// writeTable prints rows as an aligned table, indented by two spaces, with two spaces
// between columns and no trailing blanks.
func writeTable(w io.Writer, rows [][]string) {
	var widths []int
	for _, row := range rows {
		for i, cell := range row {
			if i == len(widths) {
				widths = append(widths, 0)
			}
			widths[i] = max(widths[i], utf8.RuneCountInString(cell))
		}
	}
	for _, row := range rows {
		var b strings.Builder
		b.WriteString("  ")
		for i, cell := range row {
			b.WriteString(cell)
			if i < len(row)-1 {
				b.WriteString(strings.Repeat(" ", widths[i]-utf8.RuneCountInString(cell)+2))
			}
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
	}
}

// textNone lists names, or says none.
func textNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// textDash shows an empty field as "-".
func textDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// textOneLine keeps a message on one line of a table.
func textOneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

package cfgupgrade

import "fmt"

// Step is one step of a plan, from one MAJOR.MINOR to another. A step with a
// migration file goes one minor up or down, or hops between majors, and
// carries that file's Up or Down ops. An Identity step has no file: the config
// did not change between those minors, and consecutive such minors make one
// Identity step.
type Step struct {
	From, To string
	Ops      []Op
	Identity bool
	File     string
}

// Plan returns the steps that take a config from version from to version to
// (full versions), minor by minor: up, the Up ops of each migration in
// ascending order; down, the Down ops in descending order. The same
// MAJOR.MINOR needs no steps. A change of major goes through the hop file of
// each major it crosses ({"from": "2.10", "to": "3.0"}): up, minor by minor to
// the hop's from, the hop, then on from N.0; down, to N.0, the hop's Down ops
// to its from, then on. A major crossed without a hop file is refused.
func Plan(migs []Migration, from, to string) ([]Step, error) {
	f, err := parseVersion(from)
	if err != nil {
		return nil, fmt.Errorf("plan migration: from: %w", err)
	}
	t, err := parseVersion(to)
	if err != nil {
		return nil, fmt.Errorf("plan migration: to: %w", err)
	}
	if err := checkMigrations(migs); err != nil {
		return nil, err
	}
	// up[major][m] takes minor m to m+1; hops[major] takes major to major+1.
	up := map[int]map[int]Migration{}
	hops := map[int]Migration{}
	for _, m := range migs {
		major, minor, _ := parseSeries(m.From)
		if m.hop() {
			hops[major] = m
			continue
		}
		if up[major] == nil {
			up[major] = map[int]Migration{}
		}
		up[major][minor] = m
	}
	missing := func(major int) error {
		return fmt.Errorf("plan migration: %s to %s changes the major version, and no migration file hops from the last minor of %d to %d.0 (a file {\"from\": \"%d.N\", \"to\": \"%d.0\"} in the newer tree)",
			f, t, major, major+1, major, major+1)
	}
	var steps []Step
	major, minor := f.major, f.minor
	for major < t.major {
		hop, ok := hops[major]
		if !ok {
			return nil, missing(major)
		}
		_, last, _ := parseSeries(hop.From)
		if minor > last {
			return nil, fmt.Errorf("plan migration: %s is past %s, where the hop to %s starts: %s", f, hop.From, hop.To, hop.name())
		}
		steps = append(steps, within(up[major], major, minor, last)...)
		steps = append(steps, Step{From: hop.From, To: hop.To, Ops: hop.Up, File: hop.File})
		major, minor = major+1, 0
	}
	for major > t.major {
		hop, ok := hops[major-1]
		if !ok {
			return nil, missing(major - 1)
		}
		_, last, _ := parseSeries(hop.From)
		steps = append(steps, within(up[major], major, minor, 0)...)
		steps = append(steps, Step{From: hop.To, To: hop.From, Ops: hop.Down, File: hop.File})
		major, minor = major-1, last
	}
	return append(steps, within(up[major], major, minor, t.minor)...), nil
}

// within plans the steps inside one major, from minor from to minor to, with up[m] taking
// minor m to m+1: the migration files' ops where there are files, Identity steps between.
func within(up map[int]Migration, major, from, to int) []Step {
	step := func(from, to int) Step {
		return Step{From: minorName(major, from), To: minorName(major, to)}
	}
	var steps []Step
	for m := from; m < to; {
		if mig, ok := up[m]; ok {
			s := step(m, m+1)
			s.Ops, s.File = mig.Up, mig.File
			steps = append(steps, s)
			m++
			continue
		}
		next := to
		for k := range up {
			if k > m && k < next {
				next = k
			}
		}
		s := step(m, next)
		s.Identity = true
		steps = append(steps, s)
		m = next
	}
	for m := from; m > to; {
		if mig, ok := up[m-1]; ok {
			s := step(m, m-1)
			s.Ops, s.File = mig.Down, mig.File
			steps = append(steps, s)
			m--
			continue
		}
		next := to
		for k := range up {
			if k+1 < m && k+1 > next {
				next = k + 1
			}
		}
		s := step(m, next)
		s.Identity = true
		steps = append(steps, s)
		m = next
	}
	return steps
}

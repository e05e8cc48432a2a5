package cfgupgrade

import "fmt"

// Step is one step of a plan, from one MAJOR.MINOR to another. A step with a
// migration file goes one minor up or down and carries that file's Up or Down
// ops. An Identity step has no file: the config did not change between those
// minors, and consecutive such minors make one Identity step.
type Step struct {
	From, To string
	Ops      []Op
	Identity bool
	File     string
}

// Plan returns the steps that take a config from version from to version to
// (full versions), minor by minor: up, the Up ops of each migration in
// ascending order; down, the Down ops in descending order. The same
// MAJOR.MINOR needs no steps. Different majors are refused: a major hop
// needs an explicit migration chain that migration files cannot express.
func Plan(migs []Migration, from, to string) ([]Step, error) {
	f, err := parseVersion(from)
	if err != nil {
		return nil, fmt.Errorf("plan migration: from: %w", err)
	}
	t, err := parseVersion(to)
	if err != nil {
		return nil, fmt.Errorf("plan migration: to: %w", err)
	}
	if f.major != t.major {
		return nil, fmt.Errorf("plan migration: %s to %s changes the major version, which needs an explicit migration chain", f, t)
	}
	if err := checkMigrations(migs); err != nil {
		return nil, err
	}
	// up[m] takes minor m to m+1; down[m] takes minor m to m-1.
	up := make(map[int]Migration)
	down := make(map[int]Migration)
	for _, m := range migs {
		major, minor, _ := parseSeries(m.From)
		if major == f.major {
			up[minor] = m
			down[minor+1] = m
		}
	}
	step := func(from, to int) Step {
		return Step{From: minorName(f.major, from), To: minorName(f.major, to)}
	}
	var steps []Step
	for m := f.minor; m < t.minor; {
		if mig, ok := up[m]; ok {
			s := step(m, m+1)
			s.Ops, s.File = mig.Up, mig.File
			steps = append(steps, s)
			m++
			continue
		}
		next := t.minor
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
	for m := f.minor; m > t.minor; {
		if mig, ok := down[m]; ok {
			s := step(m, m-1)
			s.Ops, s.File = mig.Down, mig.File
			steps = append(steps, s)
			m--
			continue
		}
		next := t.minor
		for k := range down {
			if k < m && k > next {
				next = k
			}
		}
		s := step(m, next)
		s.Identity = true
		steps = append(steps, s)
		m = next
	}
	return steps, nil
}

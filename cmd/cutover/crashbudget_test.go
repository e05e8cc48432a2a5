package main

// The rolling run with a node that fails within its budget: three nodes with links of their
// own; node_verify fails on node3 within max_failed = 1, so the run ends done with node3 left
// at the source (exit 3 naming it) and the others at the target.
func init() {
	sshScenarios = append(sshScenarios, sshScenario{name: "rolling-budget", servers: 2, views: true, scenario: func(fix fixtureOpts) crashScenario {
		fix.live, fix.rolling, fix.maxFailed, fix.failVerifyNode = "1.0.0", true, 1, "node3"
		return crashScenario{fix: fix, from: "1.0.0", to: "1.1.0", behind: "node3", kind: "run", args: []string{"upgrade", "--to=1.1.0", "--yes"}}
	}})
}

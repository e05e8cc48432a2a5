// Package upgrade is cutover's stage machine: it moves a cluster from the version it runs to
// another, node by node, journaled so that a crash never strands it.
//
// # Reading it
//
// [Stages] lists the stages in the order they run; each is one small type in the file named
// after it (drain.go, switch.go, ...). A stage does one thing and is idempotent. The [Runner]
// owns everything around the stages: it journals each transition, undoes the completed
// stages in reverse when a stage fails or a signal arrives before the point of no return,
// pushes through to the end after it, ignores SIGHUP, and reports progress as [Event]s.
// [Upgrade] is the entry point of `cutover upgrade --to`: it checks the input and that it
// runs on the master, takes the run lock, reads the live version and runs the stages.
//
// # One path, five workflows
//
// Every run has a [Kind]: upgrade (up, down or same-minor, all at once or rolling), sync,
// stage, prune and restore. Each command opens a session (openSession: the master check, the
// node list, the run lock, the pending run read under it), builds its stage list, and hands
// both to execute as a recipe. execute is the one path: a dry run runs the read-only stages at
// the head of the list; a real run is announced, its checks run, the operator confirms, and only
// then does beginRun enter it in the journal (orphans closed, the run record with its facts,
// tagged commands, the run log), so that a refusal or a declined prompt leaves no run. A run
// that writes an intent (upgrade, restore) stays pending until it ends; `upgrade --resume`
// and `--abort` load it by the same session (loadPending) and run or undo its kind's stages.
//
// A new command is a recipe. Write its stages, each a small type in its own file, with the
// optional interfaces that say what it is (readOnly for a check, undoer, ponrStage, onceOnly,
// releaser for an intent); list them in order in a function beside the command's entry point;
// add its Kind and its row in the kinds table to kind.go; and in the entry point, open the
// session, refuse what must be refused before anything runs, and call
//
//	err = execute(ctx, r, recipe{kind: KindX, stages: XStages(job), dryRun: opts.DryRun,
//		confirm: opts.Confirm, facts: map[string]string{...}, details: job.details,
//		what: "x app 1.0 -> 1.1", where: "on node2 (master node1)"})
//
// The Runner then journals each stage, undoes before the point of no return, pushes through
// after it and reports; the crash-point enumeration in cmd/cutover covers the new kind once a
// scenario names it.
//
// # The point of no return
//
// The point of no return is the moment the application's config changes: config-upgrade for
// an upgrade, config-downgrade for a downgrade, and the switch for a same-minor switch. The
// journal records that the stage started before it runs. Before it, any failure or SIGINT or
// SIGTERM undoes what was done and the cluster is as it was. From it on, failures are recorded
// per node and the run goes on to the end; the intent stays until a run completes.
//
// # Dependencies
//
// upgrade composes the leaf packages nodes, journal, layout and cfgupgrade through the small
// interfaces it declares ([Conn], [Dialer], [Journal]); none of them imports upgrade.
package upgrade

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

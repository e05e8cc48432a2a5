// Command demoapp is the demo application that cutover's tests and demo cluster upgrade:
// a small cluster application laid out like Ganeti, with a daemon on every node, a job
// queue on the master, a reconciler flag, a versioned config whose schema changes between
// minor versions, and a cluster-wide verify. One program serves every version; its version
// is set at build time (-ldflags "-X main.version=1.1.0").
//
// # Commands
//
//	demoapp --version
//	demoapp daemon start|stop|status     the node's daemon (TCP 7070, GET /status)
//	demoapp job submit --seconds N       master: queue a job, print its id
//	demoapp job list                     master: "ID STATE" lines (waiting, running, done)
//	demoapp queue drain|undrain          master: refuse or accept new jobs
//	demoapp queue drained                master: exit 0 if drained, 1 if not
//	demoapp queue busy                   master: the number of waiting and running jobs
//	demoapp watcher pause|continue       the reconciler flag
//	demoapp watcher paused               exit 0 if paused, 1 if not
//	demoapp ensure-dirs                  create the state directories, fix their modes
//	demoapp post-upgrade --from VERSION  record the upgrade in /var/lib/demoapp/post-upgrade.log
//	demoapp verify                       every online node answers with this version
//	demoapp node drain|undrain NODE      master: take a node out of service for the load client, or back
//	demoapp node verify NODE             master: NODE's daemon answers, whichever version it runs
//	demoapp load [--seconds N]           master: a client sending GET /status to every node not drained,
//	                                     in turn; prints each failure and, at the end, the requests
//	                                     each node served and failed (ends early on /run/demoapp/load.stop)
//
// # Mixed versions
//
// 1.2 runs beside 1.1: a 1.2 daemon reads a 1.1 config with the 1.1 schema, so a rolling run
// (cutover's [strategy] mode = "rolling") can switch the nodes one batch at a time while the
// others serve; 1.2's tree declares it in cutover/upgrade-policy.json (rolling_from).
//
// Every command exits 0 on success and otherwise prints one line starting with "demoapp:"
// on stderr and exits non-zero (2 for bad usage). Predicates print their answer on stdout:
// "queue drained" and "watcher paused" exit 1 for "no", "daemon status" prints "stopped"
// and exits 3.
//
// # The daemon
//
// "daemon start" runs "demoapp serve" detached (its own session, stdin /dev/null, output
// to /var/log/demoapp/daemon.log, pid in /run/demoapp/demoapp.pid) and returns once it
// listens, or with the daemon's own refusal: a daemon refuses a config whose MAJOR.MINOR
// is not its own, or that does not follow its schema exactly. The master's daemon runs the
// waiting jobs one at a time; a job interrupted by a stop stays in running/ and goes back
// to waiting/ when the daemon starts again, so no job is lost.
//
// # Faults on demand
//
// Before doing anything, a command named N (its words joined by '-': "daemon-stop",
// "queue-drain", "verify") appends a line to /run/demoapp/reached/N, waits while
// /run/demoapp/hold/N exists, and fails if /run/demoapp/fail/N exists.
//
// A release built to crash has a die-after file in its share tree
// (/usr/share/demoapp/VERSION/die-after, a duration such as "15s"): its daemon serves that
// long after its start, then dies.
//
// # Test hooks
//
// Hidden environment variables let tests run the real program in a temporary tree:
// DEMOAPP_ROOT prefixes every absolute path it uses (not /proc or /dev/null), DEMOAPP_PORT
// replaces port 7070, DEMOAPP_ADDR is the address the daemon listens on (all by default)
// and DEMOAPP_NODE replaces the host name as this node's name.
package main

// Package demoapp builds and installs the demo application that cutover's end-to-end tests
// and demo cluster upgrade: a small cluster application laid out like Ganeti, in three
// versions ([Versions]) whose config schema changes at each minor.
//
// # Building
//
// [Build] compiles the program in cmd/demoapp once per version, each binary reporting its
// own version. The program is described in its package comment; in short, every node runs a
// daemon (TCP port 7070, GET /status), the master runs a job queue that can be drained, and
// "demoapp verify" checks that every node runs the verifier's version.
//
// # Installing
//
// [Stage] writes one node's complete installation into a directory that the test cluster
// copies into the node's root: the side-by-side trees
//
//	/usr/lib/demoapp/<VERSION>/usr/sbin/demoapp     the program
//	/usr/share/demoapp/<VERSION>/VERSION
//	/usr/share/demoapp/<VERSION>/cutover/migrations/*.json   config migrations up to VERSION
//	/etc/demoapp/{lib,share} -> the live version's trees
//	/usr/{lib,share}/demoapp/default -> /etc/demoapp/{lib,share}
//
// the state under /var/lib/demoapp (config.json at the live version's schema, the master's
// name, the queue), a boot hook that starts the daemon, and on the master cutover's own
// configuration ([CutoverConfig]) and the crontab line that resumes an interrupted run at boot.
//
// # Config schemas
//
// 1.0 keeps addresses at /cluster/master_ip and /nodes/NAME/ip and limits the queue with
// /queue/max_jobs. 1.1 moves them to master_address and address and adds /queue/workers.
// 1.2 adds /nodes/NAME/role and /cluster/verify_timeout and drops /queue/max_jobs. A daemon
// refuses a config of another minor, or one that does not follow its schema exactly. The
// migrations in migrations/ (cutover's declarative format) convert each way.
package demoapp

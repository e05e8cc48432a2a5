// Package e2e runs the real cutover binary on the master of a real container cluster (see
// package cluster) with the demo application, and checks what each run leaves on every node:
// link targets, config versions and schema, daemons, the job queue, backups and the journal.
// Each test starts its own cluster, so the tests run in parallel.
package e2e

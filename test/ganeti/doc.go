// Package ganeti holds cutover's tests on a real Ganeti cluster: three containers of Debian
// bookworm with Debian's Ganeti 3.0.2 live and Ganeti 3.1 from bookworm-backports installed
// beside it, a cluster initialised with the fake hypervisor and diskless instances, and cutover
// installed on the master as docs/guide.md says (docs/examples/ganeti.toml and the @reboot
// line). image/build.sh builds the node image (cached by a hash of its inputs); ganeti-cluster
// starts, snapshots, restores, reboots and removes the cluster, for the tests and for
// `make ganeti-demo`.
package ganeti

// Package cluster starts throwaway clusters of containers that look like the machines cutover
// runs on, with the demo application installed side by side, and breaks them on demand.
//
// # A cluster
//
// [Start] (or [New] in a test) builds the node image once (Debian bookworm from debootstrap,
// imported into Docker without a registry and cached under a tag that hashes its inputs), creates
// one Docker network and one container per node, and stages the demo application of package
// demoapp on every node before its first boot, so the node's boot hook starts the demo daemon.
// node1 is the master: it holds root's SSH key, a known_hosts file naming every node by name and
// address (strict checking stays on), the cutover binary at /usr/sbin/cutover and its
// configuration at /etc/cutover/cutover.toml. Every node trusts the master's key. Nodes find each
// other through /etc/hosts; there is no DNS and the network has no way out of the machine.
//
// With [Options].Bare the nodes get no demo application, no cutover.toml and no daemon: the
// rest is the same, for trying an application of one's own (docs/guide.md, "Trying it in
// containers", which an end-to-end test runs as written).
//
// Node K is called nodeK and has the address 10.77.N.(10+K) on the cluster's own /24, where N is
// derived from the cluster's name and moves on when another network already holds it.
//
// # Running things
//
// [Cluster.Exec], [Cluster.Shell] and [Cluster.Cutover] run commands through docker exec. Their
// error reports only a failure of Docker itself; the command's own outcome is in [Result].
// [Cluster.CopyIn] copies a file or directory of this machine to a node, as cp -R does.
//
// # Faults
//
// [Cluster.Crash] kills a node (peers see the connection drop at once); [Cluster.PowerOff] first
// takes the node's host-side network link down, so peers see silence, as after a power cut;
// [Cluster.Cut] and [Cluster.Heal] partition a running node and bring it back; [Cluster.Reboot]
// kills and restarts a node, which runs its @reboot cron lines and boot hooks again.
// [Cluster.HoldConnections] and [Cluster.CutOneWay] drop what the master sends on its open
// connections to a node, or all it sends to the node, until [Fault.Lift]; [Cluster.Freeze]
// stops a node's processes. [Cluster.Delay] makes the master's SSH connections to nodes slow and
// lossy until [Slowdown.Lift]: iptables' NFQUEUE hands their packets to the program nfdelay, which
// holds each half the round trip and drops a given fraction (netem's part, on a kernel without
// it). [Cluster.FillDisk] makes the file system under a node's directory
// full (nothing more fits, neither data nor a new file or link) until [FullDisk.Free].
//
// # Clean-up
//
// [Cluster.Down] removes the containers and the network; only the cached image stays. [New]
// registers it with t.Cleanup, so a test never leaves a cluster behind. The command clusterctl
// (and the Makefile's cluster-* and node-* targets) does the same for humans.
package cluster

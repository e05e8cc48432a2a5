package config

import (
	"strings"
	"time"
)

// ganetiNodes lists a Ganeti cluster's nodes from its ssconf files: name, primary address,
// and "offline" for the nodes Ganeti marks offline. {state} is Ganeti's state directory.
const ganetiNodes = `off=" $(cat {state}/ssconf_offline_nodes 2>/dev/null | tr '\n' ' ') "; ` +
	`while read -r n ip; do case "$off" in *" $n "*) echo "$n $ip offline";; *) echo "$n $ip";; esac; done < {state}/ssconf_node_primary_ips`

// ganetiStart starts every daemon this node should run that does not run yet, one after
// another in Ganeti's order. Neither daemon-util's start-all nor its check-and-start is
// idempotent on Debian: where a daemon already runs under a non-root pidfile (confd),
// start-stop-daemon refuses ("matching only on non-root pidfile ... is insecure", exit 2).
// A daemon whose pidfile names a live process is left alone. A start that fails is fine when
// the daemon runs within 30 seconds: after a reboot the boot scripts start the daemons at the
// same time as a resumed run ("writing PID file; already locked?"), and on a loaded host the
// other start takes a while; when the daemon still does not run, the start is tried once
// more. A master daemon on another node exits 11 ("not master"), which start-all accepts too.
const ganetiStart = `up() { pid=$(cat "{run}/$1.pid" 2>/dev/null) && kill -0 "$pid" 2>/dev/null; }; ` +
	`for d in $({lib}/daemon-util list-start-daemons); do up "$d" && continue; ` +
	`for try in 1 2; do rc=0; {lib}/daemon-util start "$d" || rc=$?; ` +
	`case $rc in 0|11) continue 2;; esac; ` +
	`i=0; while [ $i -lt 30 ]; do sleep 1; up "$d" && continue 3; i=$((i + 1)); done; done; ` +
	`echo "$d: exit $rc" >&2; exit $rc; done`

// ganetiBusy counts the jobs that hold a drain: running, queued, waiting and canceling.
// (gnt-job list --running --pending keeps only the last of its filters.)
const ganetiBusy = `out=$(/usr/sbin/gnt-job list --no-headers -o status) && ` +
	`printf '%s\n' "$out" | awk '/^(queued|waiting|running|canceling)$/ { n++ } END { print n + 0 }'`

// ganetiRelease prints the live tree's release, with Debian's "~" of a pre-release as "-"
// (3.1.0~rc2 is 3.1.0-rc2): config.data names only the minor.
const ganetiRelease = `sed -n 's/^RELEASE_VERSION = "\(.*\)"$/\1/p' {share}/default/ganeti/_constants.py | tr '~' '-'`

// ganetiDirs are the directories of a Ganeti installation, derived from [paths] as Ganeti's
// ./configure derives them from --localstatedir, --libdir and --datadir: a Ganeti built with
// another prefix gets the profile's commands and paths without any of them written out.
type ganetiDirs struct {
	state string // {localstatedir}/lib/ganeti: ssconf, config.data, the job queue
	run   string // {localstatedir}/run/ganeti: pidfiles
	lib   string // {libdir}/ganeti: daemon-util, ensure-dirs, tools
	share string // {datadir}/ganeti: the Python modules
}

func ganetiDirsOf(p PathsConfig) ganetiDirs {
	return ganetiDirs{state: p.LocalstateDir + "/lib/ganeti", run: p.LocalstateDir + "/run/ganeti",
		lib: p.LibDir + "/ganeti", share: p.DataDir + "/ganeti"}
}

// expand replaces the placeholders {state}, {run}, {lib} and {share} of s with the
// directories.
func (d ganetiDirs) expand(s string) string {
	return strings.NewReplacer("{state}", d.state, "{run}", d.run, "{lib}", d.lib, "{share}", d.share).Replace(s)
}

// ganetiPaths are the paths p (Debian's by default), with backups leaving out what Ganeti's
// own upgrade leaves out of its backup: the job archive and instance exports (disk images).
func ganetiPaths(p PathsConfig) PathsConfig {
	d := ganetiDirsOf(p)
	p.BackupExclude = []string{d.state + "/queue/archive", d.state + "/export"}
	return p
}

// ganetiRestartWatch are the files `gnt-cluster redist-conf` writes to the nodes that Ganeti's
// daemons may read as they start: the ssconf files and the ancillary files Ganeti
// redistributes (ComputeAncillaryFiles with redist). Left out are config.data (wconfd writes
// it itself and its readers watch it) and the two ssconf files every upgrade changes that no
// daemon reads: the hypervisor parameters (the watcher's, read as it runs from cron) and the
// release version (read by gnt-cluster verify). When redist-conf changed none of the rest
// on a node, that node's daemons already run with what it sent, and the run does not stop
// and start them a second time.
func ganetiRestartWatch(p PathsConfig) []string {
	d := ganetiDirsOf(p)
	list := []string{d.state + "/ssconf_*", "!" + d.state + "/ssconf_hvparams_*", "!" + d.state + "/ssconf_release_version"}
	for _, f := range []string{"known_hosts", "hmac.key", "cluster-domain-secret", "spice.pem", "spice-ca.pem", "rapi.pem", "rapi/users"} {
		list = append(list, d.state+"/"+f)
	}
	return append(list, "/etc/hosts", p.SysconfDir+"/ganeti/scripts/master-ip-setup")
}

// ganetiDaemons are Ganeti's daemons: the processes its pid files name ({run}/*.pid, written
// by each daemon as its own user) and the processes of Ganeti's accounts that run from its
// trees. The accounts are those Debian's packages and Ganeti's ./configure create; one a node
// lacks is left out there.
func ganetiDaemons(d ganetiDirs) DaemonsConfig {
	return DaemonsConfig{
		Users: []string{"root", "gnt-masterd", "gnt-confd", "gnt-luxid", "gnt-rapi", "gnt-daemons",
			"gnt-metad", "gnt-mond", "gnt-kvmd", "gnt-wconfd", "gnt-noded"},
		PidFiles: []string{d.run + "/*.pid"},
	}
}

// ganetiProfile holds the commands and paths of a real Ganeti cluster installed with the
// directories p (Debian's: basePaths): every command by absolute path (cron's PATH has no
// /usr/sbin), SSH as Ganeti's own tools use it, the master and the nodes from ssconf. Every
// path of Ganeti's own is derived from p, so a config that sets only [paths] gets them all.
func ganetiProfile(p PathsConfig) Config {
	d := ganetiDirsOf(p)
	daemonUtil := d.lib + "/daemon-util"
	const cluster = "/usr/sbin/gnt-cluster"
	return Config{
		App:         "ganeti",
		Profile:     "ganeti",
		VersionDirs: "minor",
		Paths:       ganetiPaths(p),
		Cluster: ClusterConfig{
			NodesCommand:  d.expand(ganetiNodes),
			MasterCommand: "cat " + d.state + "/ssconf_master_node",
		},
		SSH: SSHConfig{
			User:                "root",
			IdentityFiles:       []string{"/root/.ssh/id_rsa"},
			KnownHosts:          []string{d.state + "/known_hosts"},
			KnownHostsOwners:    []string{"gnt-masterd"},
			HostKeyAliasCommand: "cat " + d.state + "/ssconf_cluster_name",
			ConnectTimeout:      Duration{10 * time.Second},
			CommandTimeout:      Duration{10 * time.Minute},
			Parallel:            32,
		},
		Commands: CommandsConfig{
			DaemonsStop:         daemonUtil + " stop-all",
			DaemonsStart:        d.expand(ganetiStart),
			DaemonsReady:        cluster + " queue info >/dev/null",
			DaemonsReadyTimeout: Duration{5 * time.Minute},
			QueueDrain:          cluster + " queue drain",
			QueueUndrain:        cluster + " queue undrain",
			QueueDrained:        cluster + " queue info | grep -q 'drain flag is set'",
			QueueBusy:           ganetiBusy,
			ReconcilerPause:     cluster + " watcher pause 3600",
			// The pause lasts an hour: a run renews it every half hour, and a resume first.
			ReconcilerPauseRenew: Duration{30 * time.Minute},
			ReconcilerContinue:   cluster + " watcher continue",
			ReconcilerPaused:     cluster + " watcher info | grep -q 'paused until'",
			EnsureDirs:           d.lib + "/ensure-dirs",
			RedistConf:           cluster + " redist-conf --yes-do-it",
			RestartWatch:         ganetiRestartWatch(p),
			PostUpgrade:          d.lib + "/tools/post-upgrade {from}",
			Verify:               cluster + " verify",
			LiveVersion:          d.expand(ganetiRelease),
		},
		Config: AppConfig{
			File:             d.state + "/config.data",
			VersionKey:       "/version",
			VersionEncoding:  "ganeti",
			Migrate:          "exec",
			UpgradeCommand:   d.lib + "/tools/cfgupgrade --verbose --force",
			DowngradeCommand: d.lib + "/tools/cfgupgrade --downgrade --verbose --force",
			Redistribute:     []string{d.state + "/config.data"},
		},
		Policy:   basePolicy(),
		Strategy: baseStrategy(),
		Stage:    baseStage(),
		Daemons:  ganetiDaemons(d),
	}
}

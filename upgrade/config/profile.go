package config

import "time"

// profiles supply a default for every key; a config file overrides any of them. A profile
// is given the file's [paths] (the defaults of basePaths where it sets none), from which it
// derives the paths of its own commands and files.
var profiles = map[string]func(PathsConfig) Config{
	"generic": genericProfile,
	"ganeti":  ganetiProfile,
}

func basePaths() PathsConfig {
	return PathsConfig{LibDir: "/usr/lib", DataDir: "/usr/share", SysconfDir: "/etc", LocalstateDir: "/var", StateDir: "/var/lib/cutover"}
}

func baseSSH() SSHConfig {
	return SSHConfig{
		User:           "root",
		IdentityFiles:  []string{"/root/.ssh/id_ed25519"},
		KnownHosts:     []string{"/root/.ssh/known_hosts", "/etc/ssh/ssh_known_hosts"},
		ConnectTimeout: Duration{10 * time.Second},
		CommandTimeout: Duration{10 * time.Minute},
		Parallel:       32,
	}
}

func basePolicy() PolicyConfig {
	return PolicyConfig{AllowMinorJump: true, Downgrade: "previous-minor", DrainTimeout: Duration{36 * time.Hour}, BackupKeep: 5, OnFailure: "stop",
		WatchInterval: Duration{30 * time.Second}, WatchFailures: 3, WatchBoots: 3}
}

func baseStrategy() StrategyConfig {
	return StrategyConfig{Mode: AllAtOnce, BatchSize: 1, BatchTimeout: Duration{10 * time.Minute}, Order: []string{MasterLast}}
}

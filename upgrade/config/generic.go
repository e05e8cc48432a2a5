package config

// genericProfile is the default profile: an application laid out as Ganeti is, with its
// config migrated by the built-in engine; the file names the commands and their paths.
func genericProfile(p PathsConfig) Config {
	return Config{
		Profile:     "generic",
		VersionDirs: "full",
		Paths:       p,
		SSH:         baseSSH(),
		Config:      AppConfig{VersionKey: "/version", VersionEncoding: "semver", Migrate: "builtin"},
		Policy:      basePolicy(),
		Strategy:    baseStrategy(),
		Stage:       baseStage(),
		Daemons:     baseDaemons(),
	}
}

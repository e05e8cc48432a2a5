package config

// genericProfile is the default profile: an application laid out as Ganeti is, with its
// config migrated by the built-in engine; the file names the commands.
func genericProfile() Config {
	return Config{
		Profile:     "generic",
		VersionDirs: "full",
		Paths:       basePaths(),
		SSH:         baseSSH(),
		Config:      AppConfig{VersionKey: "/version", VersionEncoding: "semver", Migrate: "builtin"},
		Policy:      basePolicy(),
		Strategy:    baseStrategy(),
		Stage:       baseStage(),
	}
}

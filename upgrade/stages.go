package upgrade

// Stages returns the stage machine in the order it runs (the table of docs/design.md §4). Read it top
// to bottom: every stage is one small type in the file named after it.
func Stages() []Stage {
	return []Stage{
		preflight{},       //  1 master: versions, policy, config, health gate, disk space
		verifyInstalled{}, //  2 all: both trees of the target installed, live version as expected
		intent{},          //  3 master: the intent file (undo: remove it)
		drain{},           //  4 master: drain the job queue, wait until it is empty (undo: undrain)
		pauseReconciler{}, //  5 master: pause the reconciler (undo: continue)
		stopMaster{},      //  6 master: stop the daemons (undo: start them)
		reverify{},        //  7 all: the online set has not changed, the target is still installed
		stopNodes{},       //  8 others: stop the daemons (undo: start them)
		backup{},          //  9 master: archive the state before anything changes
		configDowngrade{}, // 10 master: the newer version's down migrations (PONR of a downgrade)
		switchLinks{},     // 11 all, master last: the links (undo: switch back; PONR of a same-minor switch)
		configUpgrade{},   // 12 master: the new version's up migrations (PONR of an upgrade)
		ensureDirs{},      // 13 all
		start{},           // 14 all: start the daemons
		redistConf{},      // 15 master: the application's redist-conf command
		restart{},         // 16 all: stop and start, so daemons re-read the redistributed config
		undrain{},         // 17 master: undrain and continue the reconciler, unless they were so before
		postUpgrade{},     // 18 master: the new version's post-upgrade hook
		finish{},          // 19 master: verify, then remove the intent last
	}
}

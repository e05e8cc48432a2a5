// Package cfgupgrade migrates an application's JSON config between minor
// versions, the successor of Ganeti's cfgupgrade. cutover runs it on the
// master, where the config lives; it is the point of no return of a run.
//
// # Versions
//
// A [Spec] says where a config keeps its version: a JSON Pointer
// (RFC 6901) and an [Encoding], either [Semver] ("2.16.1") or [Ganeti]
// (2160001, Ganeti's 1000000*major + 10000*minor + revision). [ReadVersion]
// and [VersionOf] read it; [Encode] and [Decode] convert it. Configs change
// between minors only, so a config matches a version when they share
// MAJOR.MINOR.
//
// # Built-in migrations
//
// The newer version's tree ships one migration file per minor step,
// {"from": "1.1", "to": "1.2", "up": [ops], "down": [ops]}, loaded with
// [LoadMigrations]. An [Op] is set, remove, move or copy, spelled like JSON
// Patch, on paths whose segments may be "*":
//
//	{"op": "set", "path": "/queue/workers", "value": 2, "if_absent": true}
//	{"op": "move", "from": "/nodes/*/ip", "path": "/nodes/*/address"}
//
// [Plan] chains the steps from one version to another, up or down, minor by
// minor; a minor without a file is an identity step. A major is crossed by the
// one file that hops from the last minor of the old major to N.0, such as
// {"from": "2.10", "to": "3.0"}; without it a change of major is refused. [Migrate] applies a plan
// to a document in memory and sets the version, and changes nothing else: members keep their
// order (a renamed one its place, a new one goes last in its object) and the document its
// indentation, spacing, final newline and what it wrote on one line. [Apply] does it to the file:
// a dated backup readable by its owner only (the 3 newest are kept), then
// temp file, fsync and rename, and nothing changed on error. Apply is idempotent: a config already at the target is left
// alone, so a redone run or a second downgrade changes nothing. Its
// [Options.DryRun] returns the diff and writes nothing.
//
// # Exec mode
//
// [RunExec] runs the operator's command instead (Ganeti's own cfgupgrade,
// say) and checks the version it leaves. A failed command that left the
// version alone satisfies [Unchanged]: the run is still before its point of
// no return and can be rolled back.
package cfgupgrade

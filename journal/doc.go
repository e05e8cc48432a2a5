// Package journal is cutover's durable record: the run journal, the intent
// file and the run lock, all kept in cutover's state directory on the master.
//
// # Journal
//
// A [Store] is the bbolt database at one path (state_dir/journal.db). It holds
// every run, and for each run its facts and the transitions of its stages
// (started, done, failed, undone, ...) with timestamps and per-node results.
// The store is never held open: every method opens the file, does one bbolt
// transaction and closes it again, so `cutover status` and `cutover journal`
// can read while a run is going. Each durable transition ([Store.CreateRun],
// [Store.Record], [Store.SetFacts], [Store.Finish], [Store.SetOffline]) is one
// bbolt Update, synced to disk before the method returns.
//
// Errors are told apart with predicates: [IsNotFound] for an unknown run,
// [IsBusy] when another process kept the file locked past the timeout,
// [IsCorrupt] when the file is not a valid journal (garbage, truncated, empty,
// or a bbolt file of another shape) and [IsNewerSchema] when it was written by
// a newer cutover. A damaged file is never changed.
//
// The bucket tree (keys written <like this> are 8-byte big-endian integers, so
// iteration follows the order in which they were assigned):
//
//	meta
//	    schema              <schema version>
//	runs                    sequence: the last run id
//	    <run id>
//	        run             JSON: kind, versions, direction, host, pid, times, outcome, offline nodes
//	        facts
//	            <name>      value (a string, set once: the first execution wins)
//	        events          sequence: the last event seq of this run
//	            <seq>       JSON: one stage transition with its per-node results, each
//	                        with its start, end and timed steps when recorded
//
// A field added to a record that an older cutover can ignore, and that reads as its zero
// value from a journal written before it (the nodes' start, end and steps), needs no new
// schema: such journals stay readable both ways. Anything else does.
//
// The schema version is raised by the ordered list of migrations in
// schema.go; a writer applies the missing ones in the same transaction as its
// change, and a database whose schema is newer than this code knows is refused.
//
// # Intent
//
// The intent file ([WriteIntent], [ReadIntent], [RemoveIntent]) is a small
// JSON document whose presence means that a run is pending: it must be resumed
// or aborted. It is written to a temporary file, synced, renamed into place
// and its directory synced, so after a crash it is either the old file or the
// new one, never a torn one.
//
// # Lock
//
// The run lock ([AcquireLock]) is an flock(2) on a lock file that also holds
// the holder's host, pid, start time and command as JSON, so that whoever is
// refused learns who holds it. The kernel drops the lock when its holder
// exits, however it exits, so a lock file left behind by a crashed or killed
// run is simply taken over by the next one.
package journal

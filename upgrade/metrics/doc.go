// Package metrics writes what cutover knows of a cluster as Prometheus metrics, in the text
// format that node_exporter's textfile collector reads ([metrics] textfile in cutover.toml, and
// `cutover status --output prometheus`).
//
// It is pure rendering and one careful file write: [Render] turns a [Snapshot] (built by the
// upgrade package from the journal, the intent and the last look at the nodes) into the
// exposition text, and [WriteFile] replaces the textfile atomically without ever following a
// link or writing into a directory that others could change. The package imports nothing of
// cutover's; upgrade imports it, never the other way round.
//
// # Metrics
//
// Every metric carries the label app (the application of cutover.toml), so that one master
// may publish the metrics of several applications. Timestamps are seconds since the Unix
// epoch, durations seconds.
//
//	cutover_node_version_info{app,node,version}            1 per node: the version its links named at the last look
//	cutover_node_reachable{app,node}                       1 when the node answered at the last look, else 0
//	cutover_nodes_unreachable{app}                         how many nodes did not answer at the last look
//	cutover_nodes_look_timestamp_seconds{app}              when the nodes were last looked at
//	cutover_run_pending{app,run,kind,direction,stage,past_ponr}   1 while a run is pending or interrupted, else 0 (no other labels)
//	cutover_run_pending_start_timestamp_seconds{app,run,kind}     when the pending run started
//	cutover_last_run_id{app,kind}                          the newest ended run of each kind
//	cutover_last_run_start_timestamp_seconds{app,kind}     when it started
//	cutover_last_run_end_timestamp_seconds{app,kind}       when it ended
//	cutover_last_run_duration_seconds{app,kind}            how long it took
//	cutover_last_run_downtime_seconds{app,kind}            how long some node's daemons were down in it
//	cutover_last_run_result{app,kind,result}               1 for its result, 0 for the others
//	cutover_last_success_timestamp_seconds{app,kind}       when the newest done run of each kind ended
//	cutover_watch_state{app,run,kind,state}                the watch of the newest watching run: 1 for its state
//	cutover_watch_check_failures{app,run,kind}             how many of its last checks failed in a row
//	cutover_watch_end_timestamp_seconds{app,run,kind}      when its window ends
//
// docs/metrics.md is the reference operators read; keep both in step.
package metrics

package nodes

// Internal values the external tests check against.
const (
	RootRecordDir = rootRecordDir // where root's command records live
	KillWait      = killWait      // the longest a stopped command's kill is waited for
)

// WriterID names this process in the temporary names of its writes.
var WriterID = writerID

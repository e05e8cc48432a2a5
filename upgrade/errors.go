package upgrade

import "errors"

// kind classifies an error for the exit code the command line maps it to.
type kind int

const (
	kindBadInput kind = iota + 1
	kindPastPONR
	kindNotMaster
	kindNotCrossed
	kindRolledBack
)

type kindError struct {
	kind kind
	err  error
}

func (e *kindError) Error() string { return e.err.Error() }
func (e *kindError) Unwrap() error { return e.err }

func wrapKind(k kind, err error) error {
	if err == nil {
		return nil
	}
	return &kindError{kind: k, err: err}
}

func isKind(err error, k kind) bool {
	var ke *kindError
	for errors.As(err, &ke) {
		if ke.kind == k {
			return true
		}
		err = ke.err
	}
	return false
}

func badInput(err error) error   { return wrapKind(kindBadInput, err) }
func pastPONR(err error) error   { return wrapKind(kindPastPONR, err) }
func notMaster(err error) error  { return wrapKind(kindNotMaster, err) }
func notCrossed(err error) error { return wrapKind(kindNotCrossed, err) }
func rolledBack(err error) error { return wrapKind(kindRolledBack, err) }

// IsRolledBack reports whether err ended a run that failed past its point of no return and
// was then taken back to its source by the automatic rollback ([policy] on_failure =
// "rollback"): the cluster runs the source version.
func IsRolledBack(err error) bool { return isKind(err, kindRolledBack) }

// IsBadInput reports whether err is a usage or input error: nothing was touched.
func IsBadInput(err error) bool { return isKind(err, kindBadInput) }

// IsPastPONR reports whether err ended a run past its point of no return: the cluster needs
// `cutover upgrade --resume` or the operator.
func IsPastPONR(err error) bool { return isKind(err, kindPastPONR) }

// IsNotMaster reports whether err says cutover is not running on the cluster's master.
func IsNotMaster(err error) bool { return isKind(err, kindNotMaster) }

// isNotCrossed reports whether a point-of-no-return stage failed without changing anything,
// so the run is still before the point of no return.
func isNotCrossed(err error) bool { return isKind(err, kindNotCrossed) }

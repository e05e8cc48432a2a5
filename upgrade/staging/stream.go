package staging

import (
	"bytes"
	"errors"
	"fmt"
)

// maxRecord bounds one record of what a node prints about a tree: a header and a name of at
// most PATH_MAX, or a link target. A longer one is refused, not kept growing.
const maxRecord = 64 << 10

// records is the writer a node command's standard output streams into (Conn.RunOutput): it
// splits the output into records, each ended by one of the bytes of seps, and hands each
// to fn as it comes, so a listing of any length (a tree of 100,000 files) is read in the
// memory its entries take, never cut at a read limit. The first failure (fn's error, or a
// record past maxRecord) stops the parsing; the writer then discards the rest without
// failing the command, and end reports it.
//
// When fn returns errRest, the rest of the output, from the byte after that record's
// separator to the end, goes to rest unsplit (a manifest after a listing).
type records struct {
	seps string
	fn   func(rec []byte) error
	rest *limitBuffer
	buf  []byte
	err  error
	raw  bool // the output goes to rest
	// max bounds the record being read, maxRecord when 0; fn may raise it for the next
	// record (a manifest).
	max int
}

// limit is the bound of the record being read.
func (r *records) limit() int {
	if r.max > 0 {
		return r.max
	}
	return maxRecord
}

// errRest is what records' fn returns for a record after which the output goes to rest.
var errRest = errors.New("the rest of the output is not split into records")

func (r *records) Write(p []byte) (int, error) {
	n := len(p)
	for r.err == nil && len(p) > 0 {
		if r.raw {
			r.rest.Write(p)
			break
		}
		i := bytes.IndexAny(p, r.seps)
		if i < 0 {
			if len(r.buf)+len(p) > r.limit() {
				r.err = fmt.Errorf("a record longer than %d bytes", r.limit())
				break
			}
			r.buf = append(r.buf, p...)
			break
		}
		rec := p[:i]
		if len(r.buf) > 0 {
			if len(r.buf)+i > r.limit() {
				r.err = fmt.Errorf("a record longer than %d bytes", r.limit())
				break
			}
			rec = append(r.buf, rec...)
		}
		r.err = r.fn(rec)
		if errors.Is(r.err, errRest) && r.rest != nil {
			r.err, r.raw = nil, true
		}
		r.buf = r.buf[:0]
		p = p[i+1:]
	}
	return n, nil
}

// end returns the first failure, or an error when the output did not end with a separator.
func (r *records) end() error {
	if r.err == nil && len(r.buf) > 0 {
		r.err = fmt.Errorf("the output ends in the middle of a record: %q", r.buf)
	}
	return r.err
}

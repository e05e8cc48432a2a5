package layout

import (
	"cmp"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// Version is a version as cutover accepts it, MAJOR.MINOR[.PATCH][-PRERELEASE], parsed once
// by ParseVersion where it enters cutover (a flag, a config file, a command's output, a
// directory name) and carried as a value from there. The zero Version is no version: its
// String is "".
type Version struct {
	text    string // the version as given
	nums    [3]int // MAJOR, MINOR, PATCH; a missing PATCH is 0
	written int    // how many numbers text has: 2 or 3
	pre     string // PRERELEASE without its "-"; "" for a release
}

// versionPattern is MAJOR.MINOR[.PATCH][-PRERELEASE]: numbers without leading zeros, so a
// version has exactly one spelling, and dot-separated prerelease identifiers.
// Each number has at most 9 digits, so it fits every integer type that parses it.
var versionPattern = regexp.MustCompile(`^(0|[1-9][0-9]{0,8})\.(0|[1-9][0-9]{0,8})(?:\.(0|[1-9][0-9]{0,8}))?(?:-([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?$`)

// maxVersionLen bounds a version string; real ones are far shorter.
const maxVersionLen = 64

// ParseVersion parses s as a version cutover accepts: MAJOR.MINOR.PATCH or MAJOR.MINOR,
// numbers without leading zeros and of at most 9 digits, with an optional -PRERELEASE of
// dot-separated [0-9A-Za-z-] identifiers. Nothing else is accepted (no leading "v", spaces,
// "/" or shell metacharacters), so a parsed version is safe as a file name and in a command
// line. The error quotes s.
func ParseVersion(s string) (Version, error) {
	var m []string
	if len(s) <= maxVersionLen {
		m = versionPattern.FindStringSubmatch(s)
	}
	if m == nil {
		return Version{}, fmt.Errorf("invalid version %q: want MAJOR.MINOR[.PATCH][-PRERELEASE] with numbers of at most 9 digits, e.g. 1.2.0", s)
	}
	v := Version{text: s, written: 2, pre: m[4]}
	for i, n := range m[1:4] {
		if n == "" {
			continue
		}
		// At most 9 digits: Atoi cannot fail.
		v.nums[i], _ = strconv.Atoi(n)
		if i == 2 {
			v.written = 3
		}
	}
	return v, nil
}

// String returns the version as it was given to ParseVersion.
func (v Version) String() string { return v.text }

// IsZero reports whether v is the zero Version, which no text parses to.
func (v Version) IsZero() bool { return v.text == "" }

// Major returns the MAJOR number of v.
func (v Version) Major() int { return v.nums[0] }

// Minor returns the MINOR number of v.
func (v Version) Minor() int { return v.nums[1] }

// Patch returns the PATCH number of v, 0 when v was written without one.
func (v Version) Patch() int { return v.nums[2] }

// Prerelease returns the PRERELEASE of v without its "-", or "" for a release.
func (v Version) Prerelease() string { return v.pre }

// Numbers returns how many numbers v was written with: 2 (1.2) or 3 (1.2.0).
func (v Version) Numbers() int { return v.written }

// MajorMinor returns the name of v's minor version, MAJOR.MINOR ("1.2" for 1.2.3-rc1).
func (v Version) MajorMinor() string {
	return strconv.Itoa(v.nums[0]) + "." + strconv.Itoa(v.nums[1])
}

// SameMinor reports whether v and w share MAJOR.MINOR.
func (v Version) SameMinor(w Version) bool {
	return v.nums[0] == w.nums[0] && v.nums[1] == w.nums[1]
}

// Dir returns the name of the directory of v's trees (VERSIONDIR) in a version_dirs mode:
// the version itself when full ("full"), MAJOR.MINOR otherwise ("minor").
func (v Version) Dir(full bool) string {
	if full {
		return v.text
	}
	return v.MajorMinor()
}

// Compare returns -1, 0 or +1 as v sorts before, with or after w, in hashicorp/go-version's
// order: by MAJOR, MINOR and PATCH (a missing PATCH is 0), then a prerelease before its
// release, then prereleases identifier by identifier (numeric ones by value and before
// alphanumeric ones, alphanumeric ones by their bytes; where one runs out, a numeric
// identifier of the other sorts after and an alphanumeric one before). 1.2 and 1.2.0 compare
// equal. Where go-version contradicts itself (numeric identifiers of one value spelled
// differently, 01 and 1, each sort before the other), Compare orders by spelling, so that
// v.Compare(w) is always -w.Compare(v).
func (v Version) Compare(w Version) int {
	for i := range v.nums {
		if c := cmp.Compare(v.nums[i], w.nums[i]); c != 0 {
			return c
		}
	}
	switch {
	case v.pre == w.pre:
		return 0
	case v.pre == "":
		return 1
	case w.pre == "":
		return -1
	}
	a, b := strings.Split(v.pre, "."), strings.Split(w.pre, ".")
	for i := 0; i < len(a) || i < len(b); i++ {
		var x, y string
		if i < len(a) {
			x = a[i]
		}
		if i < len(b) {
			y = b[i]
		}
		if c := comparePrereleasePart(x, y); c != 0 {
			return c
		}
	}
	return 0
}

// comparePrereleasePart compares one identifier of two prereleases as go-version does; ""
// stands for an identifier one of them lacks.
func comparePrereleasePart(x, y string) int {
	if x == y {
		return 0
	}
	xn, errX := strconv.ParseInt(x, 10, 64)
	yn, errY := strconv.ParseInt(y, 10, 64)
	xNumeric, yNumeric := errX == nil, errY == nil
	switch {
	case x == "" && yNumeric:
		return -1
	case x == "":
		return 1
	case y == "" && xNumeric:
		return 1
	case y == "":
		return -1
	case xNumeric && !yNumeric:
		return -1
	case !xNumeric && yNumeric:
		return 1
	case xNumeric && yNumeric && xn != yn:
		return cmp.Compare(xn, yn)
	}
	return strings.Compare(x, y)
}

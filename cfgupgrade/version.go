package cfgupgrade

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Encoding is how a config stores its version.
type Encoding string

const (
	// Semver stores the version as a JSON string "MAJOR.MINOR.PATCH[-PRERELEASE]".
	Semver Encoding = "semver"
	// Ganeti stores the version as a JSON number,
	// 1000000*MAJOR + 10000*MINOR + REVISION, as Ganeti's config.data does.
	Ganeti Encoding = "ganeti"
)

// maxComponent bounds each numeric version component, so that arithmetic on
// versions never overflows and every Ganeti-encoded version fits a float64.
const maxComponent = 999999999

// ganetiLimit is one more than the largest Ganeti-encoded version.
const ganetiLimit = (maxComponent + 1) * 1000000

// ParseEncoding returns the Encoding named s ("semver" or "ganeti").
func ParseEncoding(s string) (Encoding, error) {
	enc := Encoding(s)
	if err := enc.check(); err != nil {
		return "", err
	}
	return enc, nil
}

func (e Encoding) check() error {
	switch e {
	case Semver, Ganeti:
		return nil
	case "":
		return fmt.Errorf("version encoding is empty (want %q or %q)", Semver, Ganeti)
	}
	return fmt.Errorf("version encoding %q is unknown (want %q or %q)", string(e), Semver, Ganeti)
}

// Encode returns version as enc stores it: the canonical string for Semver
// ("2.16.1"), a json.Number for Ganeti (2160001). A Ganeti version has no
// pre-release, a minor below 100 and a revision below 10000.
func Encode(enc Encoding, version string) (any, error) {
	if err := enc.check(); err != nil {
		return nil, err
	}
	v, err := parseVersion(version)
	if err != nil {
		return nil, err
	}
	if enc == Semver {
		return v.String(), nil
	}
	switch {
	case v.pre != "":
		return nil, fmt.Errorf("version %s: the ganeti encoding cannot hold a pre-release", v)
	case v.minor > 99:
		return nil, fmt.Errorf("version %s: the ganeti encoding needs a minor below 100", v)
	case v.patch > 9999:
		return nil, fmt.Errorf("version %s: the ganeti encoding needs a revision below 10000", v)
	}
	n := int64(v.major)*1000000 + int64(v.minor)*10000 + int64(v.patch)
	return json.Number(strconv.FormatInt(n, 10)), nil
}

// Decode returns the version "MAJOR.MINOR.PATCH[-PRERELEASE]" that v holds in
// enc, the inverse of Encode. For Ganeti, v is a JSON number (json.Number,
// float64, int or int64) that is a non-negative integer in range.
func Decode(enc Encoding, v any) (string, error) {
	if err := enc.check(); err != nil {
		return "", err
	}
	if enc == Semver {
		s, ok := v.(string)
		if !ok {
			return "", fmt.Errorf("version is %s, want a string", describe(v))
		}
		ver, err := parseVersion(s)
		if err != nil {
			return "", err
		}
		return ver.String(), nil
	}
	n, err := ganetiNumber(v)
	if err != nil {
		return "", err
	}
	ver := version{major: int(n / 1000000), minor: int(n % 1000000 / 10000), patch: int(n % 10000)}
	return ver.String(), nil
}

// ganetiNumber returns the integer a Ganeti-encoded version holds.
func ganetiNumber(v any) (int64, error) {
	var f float64
	switch x := v.(type) {
	case json.Number:
		if n, err := strconv.ParseInt(string(x), 10, 64); err == nil {
			return ganetiRange(n, string(x))
		}
		var err error
		f, err = strconv.ParseFloat(string(x), 64)
		if err != nil {
			if errors.Is(err, strconv.ErrRange) {
				return 0, fmt.Errorf("ganeti version %s is out of range", string(x))
			}
			return 0, fmt.Errorf("ganeti version %q is not a number", string(x))
		}
	case float64:
		f = x
	case int:
		return ganetiRange(int64(x), strconv.Itoa(x))
	case int64:
		return ganetiRange(x, strconv.FormatInt(x, 10))
	default:
		return 0, fmt.Errorf("version is %s, want a number", describe(v))
	}
	text := strconv.FormatFloat(f, 'g', -1, 64)
	switch {
	case math.IsNaN(f) || math.IsInf(f, 0):
		return 0, fmt.Errorf("ganeti version %s is not a number", text)
	case f != math.Trunc(f):
		return 0, fmt.Errorf("ganeti version %s is not an integer", text)
	case f < 0:
		return 0, fmt.Errorf("ganeti version %s is negative", text)
	case f >= ganetiLimit:
		return 0, fmt.Errorf("ganeti version %s is out of range", text)
	}
	return int64(f), nil
}

func ganetiRange(n int64, text string) (int64, error) {
	switch {
	case n < 0:
		return 0, fmt.Errorf("ganeti version %s is negative", text)
	case n >= ganetiLimit:
		return 0, fmt.Errorf("ganeti version %s is out of range", text)
	}
	return n, nil
}

// version is a parsed "MAJOR.MINOR.PATCH[-PRERELEASE]".
type version struct {
	major, minor, patch int
	pre                 string
}

// String returns the canonical form of v.
func (v version) String() string {
	s := fmt.Sprintf("%d.%d.%d", v.major, v.minor, v.patch)
	if v.pre != "" {
		s += "-" + v.pre
	}
	return s
}

// series returns v's MAJOR.MINOR, the unit in which configs change.
func (v version) series() string {
	return minorName(v.major, v.minor)
}

func minorName(major, minor int) string {
	return strconv.Itoa(major) + "." + strconv.Itoa(minor)
}

// parseVersion parses a full version "MAJOR.MINOR.PATCH[-PRERELEASE]": numbers
// without leading zeros, a pre-release of dot-separated [0-9A-Za-z-]
// identifiers as in Semantic Versioning, no build metadata.
func parseVersion(s string) (version, error) {
	bad := func(why string) (version, error) {
		return version{}, fmt.Errorf("version %q: %s (want MAJOR.MINOR.PATCH[-PRERELEASE])", s, why)
	}
	core, pre, hasPre := strings.Cut(s, "-")
	parts := strings.Split(core, ".")
	if len(parts) != 3 {
		return bad("not three numbers")
	}
	var nums [3]int
	for i, p := range parts {
		n, err := component(p)
		if err != nil {
			return bad(err.Error())
		}
		nums[i] = n
	}
	if hasPre {
		if err := checkPrerelease(pre); err != nil {
			return bad(err.Error())
		}
	}
	return version{major: nums[0], minor: nums[1], patch: nums[2], pre: pre}, nil
}

// parseSeries parses a "MAJOR.MINOR" as migration files name their steps.
func parseSeries(s string) (major, minor int, err error) {
	a, b, ok := strings.Cut(s, ".")
	if !ok {
		return 0, 0, fmt.Errorf("%q is not MAJOR.MINOR", s)
	}
	if major, err = component(a); err == nil {
		minor, err = component(b)
	}
	if err != nil {
		return 0, 0, fmt.Errorf("%q is not MAJOR.MINOR: %w", s, err)
	}
	return major, minor, nil
}

// component parses one numeric version component.
func component(p string) (int, error) {
	switch {
	case p == "":
		return 0, fmt.Errorf("empty number")
	case len(p) > 1 && p[0] == '0':
		return 0, fmt.Errorf("number %q has a leading zero", p)
	case len(p) > 9:
		return 0, fmt.Errorf("number %q is too large", p)
	}
	for _, c := range p {
		if c < '0' || c > '9' {
			return 0, fmt.Errorf("%q is not a number", p)
		}
	}
	n, _ := strconv.Atoi(p)
	return n, nil
}

func checkPrerelease(pre string) error {
	for _, id := range strings.Split(pre, ".") {
		if id == "" {
			return fmt.Errorf("empty pre-release identifier")
		}
		numeric := true
		for _, c := range id {
			switch {
			case c >= '0' && c <= '9':
			case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c == '-':
				numeric = false
			default:
				return fmt.Errorf("pre-release %q has the character %q", pre, c)
			}
		}
		if numeric && len(id) > 1 && id[0] == '0' {
			return fmt.Errorf("pre-release identifier %q has a leading zero", id)
		}
	}
	return nil
}

// describe names the JSON type of v for error messages.
func describe(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case string:
		return fmt.Sprintf("the string %q", x)
	case json.Number, float64, int, int64:
		return fmt.Sprintf("the number %v", x)
	case bool:
		return fmt.Sprintf("the boolean %v", x)
	case *object, map[string]any:
		return "an object"
	case []any:
		return "an array"
	}
	return fmt.Sprintf("a %T", v)
}

package layout

import (
	"strconv"
	"strings"
	"testing"

	goversion "github.com/hashicorp/go-version"
)

func TestParseVersion(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in                  string
		major, minor, patch int
		numbers             int
		pre, majorMinor     string
	}{
		{"1.2.3", 1, 2, 3, 3, "", "1.2"},
		{"1.2", 1, 2, 0, 2, "", "1.2"},
		{"0.0.0", 0, 0, 0, 3, "", "0.0"},
		{"10.20.30", 10, 20, 30, 3, "", "10.20"},
		{"1.0.0-rc1", 1, 0, 0, 3, "rc1", "1.0"},
		{"2.16.0-beta.2", 2, 16, 0, 3, "beta.2", "2.16"},
		{"3.1-rc1", 3, 1, 0, 2, "rc1", "3.1"},
		{"1.0.0-x-y", 1, 0, 0, 3, "x-y", "1.0"},
		{"1.0.0--", 1, 0, 0, 3, "-", "1.0"},
		{"999999999.999999999.999999999", 999999999, 999999999, 999999999, 3, "", "999999999.999999999"},
		{"1.0.0-" + strings.Repeat("a", 58), 1, 0, 0, 3, strings.Repeat("a", 58), "1.0"},
	}
	for _, tt := range tests {
		v, err := ParseVersion(tt.in)
		if err != nil {
			t.Errorf("ParseVersion(%q) = %v, want it parsed", tt.in, err)
			continue
		}
		if got := v.String(); got != tt.in {
			t.Errorf("ParseVersion(%q).String() = %q, want the input", tt.in, got)
		}
		if v.Major() != tt.major || v.Minor() != tt.minor || v.Patch() != tt.patch || v.Prerelease() != tt.pre {
			t.Errorf("ParseVersion(%q) = %d, %d, %d, %q; want %d, %d, %d, %q", tt.in,
				v.Major(), v.Minor(), v.Patch(), v.Prerelease(), tt.major, tt.minor, tt.patch, tt.pre)
		}
		if got := v.Numbers(); got != tt.numbers {
			t.Errorf("ParseVersion(%q).Numbers() = %d, want %d", tt.in, got, tt.numbers)
		}
		if got := v.MajorMinor(); got != tt.majorMinor {
			t.Errorf("ParseVersion(%q).MajorMinor() = %q, want %q", tt.in, got, tt.majorMinor)
		}
		if v.IsZero() {
			t.Errorf("ParseVersion(%q).IsZero() = true, want false", tt.in)
		}
	}
	for _, in := range []string{
		"", "1", "1.", ".1", "1..2", "1.2.3.4", "v1.0.0", " 1.0.0", "1.0.0 ", "1.0.0\n",
		"1.0.0; rm -rf /", "1.0.0$(reboot)", "1.0.0`id`", "../1.0", "1.0/..",
		"99999999999999999999.1.0", "1.1234567890.0", "1.2.1234567890",
		"1.0.0-", "1.0.0-a..b", "1.0.0-a.", "1.0.0-.a", "1.0.0-a/b", "1.0.0+build", "1.0.0-a+b",
		"01.2.0", "1.02", "1.2.03", "-1.0", "1.-1", "1.0.0-é",
		"1.0.0-" + strings.Repeat("a", 59),
	} {
		v, err := ParseVersion(in)
		if err == nil {
			t.Errorf("ParseVersion(%q) = %q, want an error", in, v)
			continue
		}
		if !strings.Contains(err.Error(), strconv.Quote(in)) {
			t.Errorf("ParseVersion(%q) error %q does not quote the input", in, err)
		}
		if !v.IsZero() {
			t.Errorf("ParseVersion(%q) = %q with an error, want the zero Version", in, v)
		}
	}
}

func TestVersionCompare(t *testing.T) {
	t.Parallel()
	// Each row sorts strictly before the next; rows joined by "=" compare equal.
	ordered := []string{
		"0.0.0",
		"0.9.0",
		"1.0.0-1",
		"1.0.0-2",
		"1.0.0-10",
		"1.0.0-alpha",
		"1.0.0-alpha.1",
		"1.0.0-alpha-2",
		"1.0.0-beta",
		"1.0.0-rc1",
		"1.0.0-rc2",
		"1.0 = 1.0.0",
		"1.0.1",
		"1.2-rc1 = 1.2.0-rc1",
		"1.2 = 1.2.0",
		"1.10.0",
		"2.0.0",
		"10.0.0",
	}
	var groups [][]Version
	for _, row := range ordered {
		var g []Version
		for _, s := range strings.Split(row, " = ") {
			g = append(g, mustParse(t, s))
		}
		groups = append(groups, g)
	}
	for i, gi := range groups {
		for j, gj := range groups {
			for _, a := range gi {
				for _, b := range gj {
					want := 0
					switch {
					case i < j:
						want = -1
					case i > j:
						want = 1
					}
					if got := a.Compare(b); got != want {
						t.Errorf("%s.Compare(%s) = %d, want %d", a, b, got, want)
					}
					if gv := goversion.Must(goversion.NewVersion(a.String())).Compare(goversion.Must(goversion.NewVersion(b.String()))); gv != want {
						t.Errorf("go-version compares %s and %s as %d, the table says %d", a, b, gv, want)
					}
				}
			}
		}
	}
	// In go-version's order a prerelease that runs out sorts before a numeric identifier of
	// the other and after an alphanumeric one.
	for _, tt := range []struct{ a, b string }{{"1.0.0-alpha", "1.0.0-alpha.1"}, {"1.0.0-alpha.beta", "1.0.0-alpha"}} {
		a, b := mustParse(t, tt.a), mustParse(t, tt.b)
		if a.Compare(b) != -1 || b.Compare(a) != 1 {
			t.Errorf("Compare of %s and %s = %d and %d, want -1 and 1", a, b, a.Compare(b), b.Compare(a))
		}
	}
	// go-version orders numeric prerelease identifiers of one value spelled differently
	// each before the other; Compare orders them by spelling.
	a, b := mustParse(t, "1.0.0-01"), mustParse(t, "1.0.0-1")
	if a.Compare(b) != -1 || b.Compare(a) != 1 {
		t.Errorf("Compare of %s and %s = %d and %d, want -1 and 1", a, b, a.Compare(b), b.Compare(a))
	}
}

func TestVersionSameMinor(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		a, b string
		want bool
	}{
		{"1.2.0", "1.2.9", true},
		{"1.2", "1.2.3-rc1", true},
		{"1.2.0", "1.3.0", false},
		{"1.2.0", "2.2.0", false},
		{"1.20.0", "12.0.0", false},
	} {
		a, b := mustParse(t, tt.a), mustParse(t, tt.b)
		if got := a.SameMinor(b); got != tt.want {
			t.Errorf("%s.SameMinor(%s) = %v, want %v", a, b, got, tt.want)
		}
	}
}

func TestVersionDirNames(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		version, full, minor string
	}{
		{"1.2.0", "1.2.0", "1.2"},
		{"1.2", "1.2", "1.2"},
		{"1.2.0-rc1", "1.2.0-rc1", "1.2"},
		{"1.10.3", "1.10.3", "1.10"},
		{"3.0.2-rc1", "3.0.2-rc1", "3.0"},
		{"3.1-rc1", "3.1-rc1", "3.1"},
	} {
		v := mustParse(t, tt.version)
		if got := v.Dir(true); got != tt.full {
			t.Errorf("%s.Dir(full) = %q, want %q", v, got, tt.full)
		}
		if got := v.Dir(false); got != tt.minor {
			t.Errorf("%s.Dir(minor) = %q, want %q", v, got, tt.minor)
		}
		for mode, want := range map[string]string{"full": tt.full, "minor": tt.minor} {
			if got := newTestLayout(t, mode, "").DirOf(v); got != want {
				t.Errorf("%s: DirOf(%s) = %q, want %q", mode, v, got, want)
			}
		}
	}
}

// FuzzParseVersion: ParseVersion never panics; what it accepts it gives back as it was
// written, ValidVersion agrees with it, its directory name is a version again, and
// go-version reads it and orders it as Compare does.
func FuzzParseVersion(f *testing.F) {
	for _, s := range []string{"1.2.0", "1.2", "1.0.0-rc1", "2.16.0-beta.2", "1.0.0-01", "1.0.0--1",
		"1.0.0-a.1", "999999999.0.0", "1.02", "v1.0.0", "1.0.0+b", ""} {
		f.Add(s, "1.0.0-1")
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		va, errA := ParseVersion(a)
		if (errA == nil) != (ValidVersion(a) == nil) {
			t.Fatalf("ParseVersion(%q) = %v but ValidVersion = %v", a, errA, ValidVersion(a))
		}
		if errA != nil {
			return
		}
		if va.String() != a {
			t.Fatalf("ParseVersion(%q).String() = %q", a, va.String())
		}
		for _, full := range []bool{true, false} {
			if d, err := ParseVersion(va.Dir(full)); err != nil || d.Dir(full) != va.Dir(full) {
				t.Fatalf("ParseVersion(%q.Dir(%v) = %q) = %v, %v", a, full, va.Dir(full), d, err)
			}
		}
		ga, err := goversion.NewVersion(a)
		if err != nil {
			t.Fatalf("go-version cannot read %q: %v", a, err)
		}
		vb, err := ParseVersion(b)
		if err != nil {
			return
		}
		c := va.Compare(vb)
		if vb.Compare(va) != -c {
			t.Fatalf("%s.Compare(%s) = %d and back %d", va, vb, c, vb.Compare(va))
		}
		gb := goversion.Must(goversion.NewVersion(b))
		// Where go-version contradicts itself, Compare orders by spelling.
		if g := ga.Compare(gb); g == -gb.Compare(ga) && g != c {
			t.Fatalf("%s.Compare(%s) = %d, go-version says %d", va, vb, c, g)
		}
	})
}

func mustParse(t *testing.T, s string) Version {
	t.Helper()
	v, err := ParseVersion(s)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

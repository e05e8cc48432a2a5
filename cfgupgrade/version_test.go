package cfgupgrade

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
)

func TestParseEncoding(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in      string
		want    Encoding
		wantErr string
	}{
		{"semver", Semver, ""},
		{"ganeti", Ganeti, ""},
		{"", "", "version encoding is empty"},
		{"Semver", "", `version encoding "Semver" is unknown`},
		{"int", "", `version encoding "int" is unknown`},
	}
	for _, tt := range tests {
		got, err := ParseEncoding(tt.in)
		if !errorMatches(err, tt.wantErr) || got != tt.want {
			t.Errorf("ParseEncoding(%q) = %q, %v; want %q, error containing %q", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestEncodeDecode(t *testing.T) {
	t.Parallel()
	tests := []struct {
		enc     Encoding
		version string
		encoded any
	}{
		{Semver, "2.16.1", "2.16.1"},
		{Semver, "0.0.0", "0.0.0"},
		{Semver, "1.2.3-rc.1", "1.2.3-rc.1"},
		{Semver, "1.2.3-alpha-2.x", "1.2.3-alpha-2.x"},
		{Ganeti, "2.16.1", json.Number("2160001")},
		{Ganeti, "2.15.0", json.Number("2150000")},
		{Ganeti, "0.0.0", json.Number("0")},
		{Ganeti, "3.99.9999", json.Number("3999999")},
		{Ganeti, "999999999.1.2", json.Number("999999999010002")},
	}
	for _, tt := range tests {
		got, err := Encode(tt.enc, tt.version)
		if err != nil || got != tt.encoded {
			t.Errorf("Encode(%s, %q) = %#v, %v; want %#v", tt.enc, tt.version, got, err, tt.encoded)
			continue
		}
		back, err := Decode(tt.enc, got)
		if err != nil || back != tt.version {
			t.Errorf("Decode(%s, %#v) = %q, %v; want %q", tt.enc, got, back, err, tt.version)
		}
	}
}

func TestEncodeErrors(t *testing.T) {
	t.Parallel()
	tests := []struct {
		enc     Encoding
		version string
		wantErr string
	}{
		{Semver, "1.2", "not three numbers"},
		{Semver, "v1.2.3", `"v1" is not a number`},
		{Semver, "1.02.3", "leading zero"},
		{Semver, "1.2.3+build", `"3+build" is not a number`},
		{Semver, "1.2.3-", "empty pre-release identifier"},
		{Semver, "1.2.3-rc..1", "empty pre-release identifier"},
		{Semver, "1.2.3-rc_1", `character '_'`},
		{Semver, "1.2.3-01", "leading zero"},
		{Semver, "1.2.1234567890", "too large"},
		{Semver, "", "not three numbers"},
		{Ganeti, "2.16.1-rc1", "cannot hold a pre-release"},
		{Ganeti, "2.100.0", "minor below 100"},
		{Ganeti, "2.16.10000", "revision below 10000"},
		{"yaml", "1.0.0", `version encoding "yaml" is unknown`},
	}
	for _, tt := range tests {
		got, err := Encode(tt.enc, tt.version)
		if !errorMatches(err, tt.wantErr) || tt.wantErr == "" {
			t.Errorf("Encode(%s, %q) = %#v, %v; want error containing %q", tt.enc, tt.version, got, err, tt.wantErr)
		}
	}
}

func TestDecode(t *testing.T) {
	t.Parallel()
	tests := []struct {
		enc     Encoding
		in      any
		want    string
		wantErr string
	}{
		{Ganeti, json.Number("2160001"), "2.16.1", ""},
		{Ganeti, json.Number("2160001.0"), "2.16.1", ""},
		{Ganeti, json.Number("2.160001e6"), "2.16.1", ""},
		{Ganeti, float64(2150000), "2.15.0", ""},
		{Ganeti, 3000002, "3.0.2", ""},
		{Ganeti, int64(3010000), "3.1.0", ""},
		{Ganeti, json.Number("-1"), "", "negative"},
		{Ganeti, float64(-2150000), "", "negative"},
		{Ganeti, json.Number("2160001.5"), "", "not an integer"},
		{Ganeti, 0.5, "", "not an integer"},
		{Ganeti, json.Number("1000000000000000"), "", "out of range"},
		{Ganeti, json.Number("99999999999999999999999"), "", "out of range"},
		{Ganeti, json.Number("1e400"), "", "out of range"},
		{Ganeti, 1e300, "", "out of range"},
		{Ganeti, math.NaN(), "", "not a number"},
		{Ganeti, math.Inf(1), "", "not a number"},
		{Ganeti, json.Number("abc"), "", "not a number"},
		{Ganeti, "2160001", "", `the string "2160001", want a number`},
		{Ganeti, nil, "", "null, want a number"},
		{Semver, "1.0.0", "1.0.0", ""},
		{Semver, json.Number("100"), "", "the number 100, want a string"},
		{Semver, true, "", "the boolean true, want a string"},
		{Semver, map[string]any{}, "", "an object, want a string"},
		{Semver, "1.0", "", "not three numbers"},
		{"", "1.0.0", "", "version encoding is empty"},
	}
	for _, tt := range tests {
		got, err := Decode(tt.enc, tt.in)
		if !errorMatches(err, tt.wantErr) || got != tt.want {
			t.Errorf("Decode(%s, %#v) = %q, %v; want %q, error containing %q", tt.enc, tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}

// errorMatches reports whether err is nil when want is empty, or contains
// want otherwise.
func errorMatches(err error, want string) bool {
	if want == "" {
		return err == nil
	}
	return err != nil && strings.Contains(err.Error(), want)
}

package config

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Duration is a time.Duration written in a config as a string such as "10s" or "36h".
type Duration struct{ time.Duration }

// durationExample ends the error of a bad duration.
const durationExample = `write a number and a unit in quotes, such as "5s" or "2m30s"`

// UnmarshalTOML parses a duration string, and refuses a bare number with the string meant.
func (d *Duration) UnmarshalTOML(v any) error {
	switch v := v.(type) {
	case string:
		return d.UnmarshalText([]byte(v))
	case int64:
		return fmt.Errorf("invalid duration %d: a number, not a string with a unit; %s", v, unitHint(strconv.FormatInt(v, 10)))
	case float64:
		return fmt.Errorf("invalid duration %v: a number, not a string with a unit; %s", v, unitHint(strconv.FormatFloat(v, 'g', -1, 64)))
	}
	return fmt.Errorf("invalid duration %v: %s", v, durationExample)
}

// UnmarshalText parses a duration string.
func (d *Duration) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		if _, nerr := strconv.ParseFloat(string(b), 64); nerr == nil {
			return fmt.Errorf("invalid duration %q: no unit; %s", b, unitHint(string(b)))
		}
		return fmt.Errorf("invalid duration %q: %s", b, durationExample)
	}
	if v < 0 {
		return fmt.Errorf("negative duration %q: %s", b, durationExample)
	}
	d.Duration = v
	return nil
}

// unitHint tells how to write the number of seconds num as a duration.
func unitHint(num string) string {
	if strings.HasPrefix(num, "-") {
		return durationExample
	}
	return fmt.Sprintf("write %q for %s seconds, or another unit such as \"2m30s\"", num+"s", num)
}

// MarshalText formats a duration string.
func (d Duration) MarshalText() ([]byte, error) { return []byte(d.String()), nil }

package config

import (
	"fmt"
	"path"
	"strings"
)

// MetricsConfig is [metrics]: where cutover publishes its Prometheus metrics (docs/metrics.md).
type MetricsConfig struct {
	// Textfile is the file, in node_exporter's textfile collector directory, that every run
	// (at each stage), and `cutover status`, rewrites atomically; "" publishes nothing.
	// Debian's prometheus-node-exporter reads /var/lib/prometheus/node-exporter/*.prom.
	Textfile string `toml:"textfile"`
}

func (m MetricsConfig) validate() []error {
	if m.Textfile == "" {
		return nil
	}
	base := path.Base(m.Textfile)
	if !cleanAbs(m.Textfile) || m.Textfile == "/" || !strings.HasSuffix(base, ".prom") || base == ".prom" || strings.HasPrefix(base, ".") {
		return []error{fmt.Errorf("metrics.textfile %q: must be a clean absolute path to a file whose name ends in .prom (node_exporter reads only those), such as \"/var/lib/prometheus/node-exporter/cutover.prom\"", m.Textfile)}
	}
	return nil
}

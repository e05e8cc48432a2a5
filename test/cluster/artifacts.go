package cluster

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"

	"github.com/cutover/cutover/test/demoapp"
)

// artifacts are the binaries a cluster installs.
type artifacts struct {
	bins *demoapp.Binaries // the demo application, one executable per version
	deb  string            // cutover's Debian package for the master
}

// shared holds the binaries built by this process, kept while any cluster of the process uses
// them and removed with the last one.
var shared struct {
	mu    sync.Mutex
	users int
	dir   string
	bins  *demoapp.Binaries
	deb   string
}

// acquireArtifacts returns the binaries for a new cluster, building what this process has not
// built yet, and the function that gives them back. deb, when set, is used instead of building
// cutover's package; the demo application is built only when demo is set (its bins are nil
// otherwise, unless this process built them for another cluster).
func acquireArtifacts(ctx context.Context, deb string, demo bool) (_ *artifacts, release func(), err error) {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	defer func() {
		if err != nil && shared.users == 0 {
			resetShared()
		}
	}()
	if shared.dir == "" {
		dir, err := os.MkdirTemp("", "cutover-cluster-bin-")
		if err != nil {
			return nil, nil, fmt.Errorf("build binaries: %w", err)
		}
		shared.dir = dir
	}
	if deb != "" {
		fi, err := os.Stat(deb)
		if err != nil {
			return nil, nil, fmt.Errorf("cutover package: %w", err)
		}
		if !fi.Mode().IsRegular() || !strings.HasSuffix(deb, ".deb") {
			return nil, nil, fmt.Errorf("cutover package %s: not a .deb file", deb)
		}
	}
	// The two builds are independent: run them side by side.
	var wg sync.WaitGroup
	var berr, cerr error
	if demo && shared.bins == nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			shared.bins, berr = buildDemoapp(ctx, filepath.Join(shared.dir, "demoapp"))
		}()
	}
	if deb == "" && shared.deb == "" {
		wg.Add(1)
		go func() {
			defer wg.Done()
			shared.deb, cerr = buildPackage(ctx, filepath.Join(shared.dir, "cutover"))
		}()
	}
	wg.Wait()
	if err := errors.Join(berr, cerr); err != nil {
		return nil, nil, err
	}
	art := &artifacts{bins: shared.bins, deb: deb}
	if art.deb == "" {
		art.deb = shared.deb
	}
	shared.users++
	return art, sync.OnceFunc(func() {
		shared.mu.Lock()
		defer shared.mu.Unlock()
		shared.users--
		if shared.users == 0 {
			resetShared()
		}
	}), nil
}

// resetShared removes the built binaries. The caller holds shared.mu.
func resetShared() {
	if shared.dir != "" {
		os.RemoveAll(shared.dir)
	}
	shared.dir, shared.bins, shared.deb = "", nil, ""
}

// moduleRoot returns the directory of this module's go.mod.
func moduleRoot(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", fmt.Errorf("go env GOMOD: not inside the cutover module")
	}
	return filepath.Dir(gomod), nil
}

// buildDemoapp builds every version of the demo application into dir.
func buildDemoapp(ctx context.Context, dir string) (*demoapp.Binaries, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("build demoapp: %w", err)
	}
	bins, err := demoapp.Build(ctx, dir)
	if err != nil {
		return nil, fmt.Errorf("build demoapp: %w", err)
	}
	return bins, nil
}

// buildPackage builds a static ./cmd/cutover and cutover's Debian package from it in dir, as
// `make deb` does, and returns the package's path.
func buildPackage(ctx context.Context, dir string) (string, error) {
	root, err := moduleRoot(ctx)
	if err != nil {
		return "", fmt.Errorf("build cutover: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("build cutover: %w", err)
	}
	bin := filepath.Join(dir, "cutover")
	version, err := exec.CommandContext(ctx, filepath.Join(root, "packaging/version.sh")).Output()
	if err != nil {
		return "", fmt.Errorf("build cutover: packaging/version.sh: %w", err)
	}
	ldflags := "-s -w -X main.version=" + strings.TrimSpace(string(version))
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-ldflags", ldflags, "-o", bin, "./cmd/cutover")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if msg, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build cutover: %w: %s", err, tail(string(msg), 8))
	}
	var stderr strings.Builder
	cmd = exec.CommandContext(ctx, filepath.Join(root, "packaging/build-deb.sh"), bin, dir)
	cmd.Dir = root
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("build cutover's package: %w: %s", err, tail(stderr.String(), 8))
	}
	return strings.TrimSpace(string(out)), nil
}

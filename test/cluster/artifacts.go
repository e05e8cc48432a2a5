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
	bins    *demoapp.Binaries // the demo application, one executable per version
	cutover string            // the cutover binary for the master
}

// shared holds the binaries built by this process, kept while any cluster of the process uses
// them and removed with the last one.
var shared struct {
	mu      sync.Mutex
	users   int
	dir     string
	bins    *demoapp.Binaries
	cutover string
}

// acquireArtifacts returns the binaries for a new cluster, building what this process has not
// built yet, and the function that gives them back. cutoverBin, when set, is used instead of
// building cutover.
func acquireArtifacts(ctx context.Context, cutoverBin string) (_ *artifacts, release func(), err error) {
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
	if cutoverBin != "" {
		fi, err := os.Stat(cutoverBin)
		if err != nil {
			return nil, nil, fmt.Errorf("cutover binary: %w", err)
		}
		if !fi.Mode().IsRegular() || fi.Mode()&0o111 == 0 {
			return nil, nil, fmt.Errorf("cutover binary %s: not an executable file", cutoverBin)
		}
	}
	// The two builds are independent: run them side by side.
	var wg sync.WaitGroup
	var berr, cerr error
	if shared.bins == nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			shared.bins, berr = buildDemoapp(ctx, filepath.Join(shared.dir, "demoapp"))
		}()
	}
	if cutoverBin == "" && shared.cutover == "" {
		wg.Add(1)
		go func() {
			defer wg.Done()
			path := filepath.Join(shared.dir, "cutover")
			if cerr = buildCutover(ctx, path); cerr == nil {
				shared.cutover = path
			}
		}()
	}
	wg.Wait()
	if err := errors.Join(berr, cerr); err != nil {
		return nil, nil, err
	}
	art := &artifacts{bins: shared.bins, cutover: cutoverBin}
	if art.cutover == "" {
		art.cutover = shared.cutover
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
	shared.dir, shared.bins, shared.cutover = "", nil, ""
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

// buildCutover builds a static ./cmd/cutover into out.
func buildCutover(ctx context.Context, out string) error {
	root, err := moduleRoot(ctx)
	if err != nil {
		return fmt.Errorf("build cutover: %w", err)
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", out, "./cmd/cutover")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if msg, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build cutover: %w: %s", err, tail(string(msg), 8))
	}
	return nil
}

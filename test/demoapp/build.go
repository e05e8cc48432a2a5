package demoapp

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

// Versions are the demo application's releases, oldest first.
var Versions = []string{"1.0.0", "1.1.0", "1.2.0"}

// programPackage is the demo program, relative to the module root.
const programPackage = "./test/demoapp/cmd/demoapp"

// Binaries holds the demoapp executables built for each version (static, CGO_ENABLED=0).
type Binaries struct {
	Dir   string            // where the executables are
	Paths map[string]string // version -> path of the executable
}

// Build compiles cmd/demoapp once per version into dir, each binary stamped with its
// version (go build -trimpath -ldflags "-X main.version=V"). It finds the module root with
// `go env GOMOD`, so it works from any directory inside the module, tests included.
func Build(ctx context.Context, dir string) (*Binaries, error) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		return nil, fmt.Errorf("build demoapp: go tool not found: %w", err)
	}
	root, err := moduleRoot(ctx, gobin)
	if err != nil {
		return nil, err
	}
	dir, err = filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("build demoapp: %w", err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("build demoapp: %w", err)
	}
	bins := &Binaries{Dir: dir, Paths: make(map[string]string, len(Versions))}
	errs := make([]error, len(Versions))
	var wg sync.WaitGroup
	for i, v := range Versions {
		out := filepath.Join(dir, "demoapp-"+v)
		bins.Paths[v] = out
		wg.Go(func() { errs[i] = buildVersion(ctx, gobin, root, v, out) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return bins, nil
}

// buildVersion builds the program of version v into out.
func buildVersion(ctx context.Context, gobin, root, v, out string) error {
	cmd := exec.CommandContext(ctx, gobin, "build", "-trimpath",
		"-ldflags", "-X main.version="+v, "-o", out, programPackage)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("build demoapp %s: %w: %s", v, err, strings.TrimSpace(stderr.String()))
	}
	return nil
}

// moduleRoot returns the directory of the cutover module's go.mod.
func moduleRoot(ctx context.Context, gobin string) (string, error) {
	out, err := exec.CommandContext(ctx, gobin, "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("build demoapp: go env GOMOD: %w", err)
	}
	gomod := strings.TrimSpace(string(out))
	if gomod == "" || gomod == os.DevNull {
		return "", errors.New("build demoapp: not inside the cutover module (go env GOMOD is empty)")
	}
	root := filepath.Dir(gomod)
	if _, err := os.Stat(filepath.Join(root, programPackage)); err != nil {
		return "", fmt.Errorf("build demoapp: module %s has no %s: %w", root, programPackage, err)
	}
	return root, nil
}

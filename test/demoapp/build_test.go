package demoapp

import (
	"debug/elf"
	"os/exec"
	"strings"
	"testing"
)

func TestBuild(t *testing.T) {
	t.Parallel()
	if len(testBins.Paths) != len(Versions) {
		t.Fatalf("Build made %d binaries, want %d", len(testBins.Paths), len(Versions))
	}
	for _, v := range Versions {
		t.Run(v, func(t *testing.T) {
			t.Parallel()
			path := testBins.Paths[v]
			out, err := exec.Command(path, "--version").Output()
			if err != nil {
				t.Fatalf("%s --version: %v", path, err)
			}
			if got := strings.TrimSpace(string(out)); got != v {
				t.Errorf("%s --version = %q, want %q", path, got, v)
			}
			f, err := elf.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			for _, p := range f.Progs {
				if p.Type == elf.PT_INTERP {
					t.Errorf("%s has a program interpreter: not a static binary", path)
				}
			}
			if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
				t.Errorf("%s links %v: not a static binary", path, libs)
			}
		})
	}
}

func TestBuildOutsideModule(t *testing.T) {
	t.Chdir(t.TempDir())
	t.Setenv("GO111MODULE", "on")
	if _, err := Build(t.Context(), t.TempDir()); err == nil {
		t.Fatal("Build outside the module succeeded, want an error")
	}
}

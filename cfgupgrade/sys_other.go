//go:build !unix

package cfgupgrade

import (
	"io/fs"
	"os"
	"os/exec"
)

// keepOwner does nothing where files have no Unix owner.
func keepOwner(*os.File, fs.FileInfo) error { return nil }

// isolate leaves cmd as it is where there are no process groups.
func isolate(*exec.Cmd) {}

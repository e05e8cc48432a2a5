// Command cutover switches every node of a cluster from one installed version of an
// application to another, journaled so that a crash or a reboot never strands the cluster.
package main

import (
	"fmt"
	"os"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "dev"

func main() {
	if len(os.Args) > 1 && os.Args[1] == "version" {
		fmt.Println("cutover", version)
		return
	}
	fmt.Fprintln(os.Stderr, "cutover: usage: cutover version")
	os.Exit(2)
}

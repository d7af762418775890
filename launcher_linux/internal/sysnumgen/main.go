// Command sysnumgen writes launcher_linux's syscall tables, the numbers in
// one file per architecture and the lookup by name in one they share
// (sysnum.go), from golang.org/x/sys/unix's zsysnum_linux_<arch>.go,
// which x/sys generates from the kernel's headers: the numbers the
// seccomp program and the notification supervisor use are the kernel's by
// construction, and TestTablesAreGenerated fails when a committed table
// differs from what this writes for the x/sys version in go.mod.
//
//	go generate ./launcher_linux
package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
)

func main() {
	xsys := flag.String("xsys", "", "the golang.org/x/sys module directory")
	out := flag.String("out", "", "the launcher_linux directory to write the tables into")
	flag.Parse()
	if *xsys == "" || *out == "" {
		flag.Usage()
		os.Exit(2)
	}
	files, err := Generate(*xsys)
	if err != nil {
		log.Fatal(err)
	}
	for name, src := range files {
		if err := os.WriteFile(filepath.Join(*out, name), src, 0o644); err != nil {
			log.Fatal(fmt.Errorf("write %s: %w", name, err))
		}
	}
}

package main

import (
	"fmt"
	"os"
	"path/filepath"
)

// main writes the generated files. It runs from the module root, as go
// generate does for the root package.
func main() {
	files, err := Generate(".")
	if err != nil {
		fmt.Fprintln(os.Stderr, "contractgen:", err)
		os.Exit(1)
	}
	for path, src := range files {
		if err := os.WriteFile(filepath.FromSlash(path), src, 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "contractgen:", err)
			os.Exit(1)
		}
	}
}

// Command gen writes docs/configuration.md (go generate ./internal/config/...,
// make docs): see package configdoc.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/gpuhc/gpuhc/internal/config"
	"github.com/gpuhc/gpuhc/internal/config/configdoc"
)

func main() {
	src := flag.String("toml", "etc/gpuhc.toml", "the shipped configuration, whose comments describe the keys")
	out := flag.String("out", "docs/configuration.md", "the reference to write")
	flag.Parse()
	if err := run(*src, *out); err != nil {
		fmt.Fprintln(os.Stderr, "configdoc:", err)
		os.Exit(1)
	}
}

func run(src, out string) error {
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	doc, err := configdoc.Generate(config.Keys(), string(data))
	if err != nil {
		return err
	}
	if err := os.WriteFile(out, append(doc, '\n'), 0o644); err != nil {
		return fmt.Errorf("write the reference: %w", err)
	}
	return nil
}

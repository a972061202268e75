package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/pml-dev/pml/internal/config"
	"github.com/pml-dev/pml/internal/deps"
	"github.com/pml-dev/pml/internal/npmreg"
	"github.com/pml-dev/pml/internal/pyindex"
)

// addPyPI resolves spec (NAME or NAME@VERSION) in the Python package
// index the person's pip or uv configuration names and adds it as a
// server: the entry is uvx's form with the exact version, which pml
// derives into pml/python:3.11 (config.DerivePython); the install, run
// now, locks every distribution by sha256 in .pml/deps.json.
func addPyPI(cmd *cobra.Command, g *globals, spec string, o addServerOptions) error {
	name, version, _ := strings.Cut(spec, "@")
	if v, ok := strings.CutPrefix(version, "="); ok { // NAME@==1.2
		version = strings.TrimPrefix(v, "=")
	}
	if n, v, ok := strings.Cut(name, "=="); ok {
		name, version = n, v
	}
	if deps.PipName(name) != name || name == "" {
		return &exitError{2, fmt.Errorf("%q is not a Python package name (pml add pypi:NAME or pypi:NAME@VERSION)", spec)}
	}
	index := deps.PythonIndexOf(os.Getenv)
	rel, err := pyindex.Resolve(cmd.Context(), npmHTTP, index.URL, name, version)
	switch {
	case errors.Is(err, pyindex.ErrNotFound), errors.Is(err, pyindex.ErrNoWheel):
		return &exitError{2, err}
	case err != nil:
		return &exitError{5, err}
	}
	srvName := o.name
	if srvName == "" {
		srvName = npmreg.ServerName(name)
	}
	req := name + "==" + rel.Version
	entry := serverEntry{
		Description: fmt.Sprintf("Python %s, added by pml add", req),
		Command:     "uvx",
		Args:        append([]string{req}, o.args...),
	}
	fmt.Fprintf(g.narration(), "resolved %s to %s from %s (%s, sha256 %s)\n", name, rel.Version, index.Redacted(), rel.Wheel, rel.SHA256)
	what := fmt.Sprintf("%s (Python %s): runs its console script in %s; installs with pip from %s (named by %s, the install's only host), "+
		"every distribution locked by its sha256 in .pml/deps.json", srvName, req, config.PythonImage, index.Redacted(), index.From)
	o.source = "pypi:" + name + "@" + rel.Version
	return addServer(cmd, g, srvName, entry, what, o)
}

package main

import (
	"fmt"
	"sort"
	"strings"

	"github.com/spf13/cobra"

	"github.com/pml-dev/pml/internal/config"
	"github.com/pml-dev/pml/internal/mcpjson"
)

// addFromMCPJSON imports server name of the workspace's .mcp.json (a
// client's own entry, run there uncontained) into .pml.json's mcps,
// where pml runs it in a container: a uvx or python -m entry is written
// as it is, which pml derives into pml/python:3.11 (config.DerivePython),
// installed and locked by hash. The entry's env values are not copied:
// .pml.json is committed and they may be secrets; their names become
// env_required, taken from the person's environment (or .env) at start.
func addFromMCPJSON(cmd *cobra.Command, g *globals, name string, o addServerOptions) error {
	_, ws, err := g.workspace()
	if err != nil {
		return err
	}
	f, err := mcpjson.Read(mcpjson.Path(ws.Dir))
	if err != nil {
		return &exitError{2, err}
	}
	e, ok, err := f.Server(name)
	switch {
	case err != nil:
		return &exitError{2, err}
	case !ok:
		return &exitError{2, fmt.Errorf("%s has no server %q (it has: %s)", f.Path, name, strings.Join(f.Servers(), ", "))}
	}
	if !config.PythonCommand(e.Command, e.Args) {
		hint := "write its mcps entry with an image (docs/servers.md)"
		if e.Command == "npx" {
			hint = "for an npm package run `pml add npm:PACKAGE`"
		}
		return &exitError{2, fmt.Errorf("%s's %q runs %q: pml imports the entries it can contain by itself (uvx NAME, python -m MODULE); %s", f.Path, name, e.Command, hint)}
	}
	var required []string
	for k := range e.Env {
		required = append(required, k)
	}
	sort.Strings(required)
	srvName := o.name
	if srvName == "" {
		srvName = strings.ToLower(name)
	}
	entry := serverEntry{
		Description: fmt.Sprintf("imported from %s's %q by pml add", mcpjson.FileName, name),
		Command:     e.Command,
		Args:        append(append([]string(nil), e.Args...), o.args...),
		EnvRequired: required,
	}
	what := fmt.Sprintf("%s (from %s's %q): runs `%s %s` in %s, installed with pip and locked by hash", srvName, mcpjson.FileName, name,
		e.Command, strings.Join(entry.Args, " "), config.PythonImage)
	if len(required) > 0 {
		what += fmt.Sprintf("; its env values are not copied (.pml.json is committed): %s come from your environment or .env", strings.Join(required, ", "))
	}
	what += fmt.Sprintf(". %s is left as it is: remove %q there once the client runs it through pml", mcpjson.FileName, name)
	o.source = "mcp.json:" + name
	return addServer(cmd, g, srvName, entry, what, o)
}

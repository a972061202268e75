package registry

import (
	"fmt"
	"strings"

	"github.com/pml-dev/pml/internal/config"
	"github.com/pml-dev/pml/internal/npmspec"
	"github.com/pml-dev/pml/internal/sri"
)

// NodeImage is the image npm servers run in when an entry names none.
const NodeImage = "pml/node:18"

// nodeLauncher runs an installed npm package's executable as `node BIN
// ARGS…` would: it reads the package's "bin" from its package.json in
// /deps (the only executable, or the one named like the package) and
// imports it, CommonJS or ES module alike. process.argv is made what the
// server expects ([node, BIN, ARGS…]). The package is argv[1].
const nodeLauncher = `const pkg=process.argv[1];const path=require("path");const dir=path.join("/deps/node_modules",pkg);` +
	`let bin=require(path.join(dir,"package.json")).bin;const base=pkg.split("/").pop();` +
	`if(bin&&typeof bin==="object"){const k=Object.keys(bin);bin=k.length===1?bin[k[0]]:(bin[base]||bin["mcp-"+base]);}` +
	`if(typeof bin!=="string"){console.error("pml: "+pkg+" has no single executable (bin) to run; declare the server in .pml.json with its command");process.exit(2);}` +
	`const main=path.resolve(dir,bin);process.argv[1]=main;import(require("url").pathToFileURL(main).href).catch(e=>{console.error(e);process.exit(1);});`

// derivedServer is the server of a stdio entry in the seeds' format, which
// says how to install the server ("install": {"command": "npx", "args":
// ["-y", "pkg@1.2.3", ARGS…]}) but not pml's container fields: it runs in
// NodeImage, installed with npm into /deps, its package's executable
// started with ARGS. An entry without install.integrity has its first
// install's version and integrity recorded and checked on every later
// install (.pml/deps.json).
func derivedServer(e *Entry, f FQDN) (config.Server, error) {
	m := e.Meta
	fail := func(key, problem string) (config.Server, error) {
		return config.Server{}, fmt.Errorf("registry entry %s (from %s): %q %s", e.FQDN, e.Registry, key, problem)
	}
	in := m.Install
	if in == nil {
		return fail("image", `is required when there is no "install" (e.g. "pml/node:18", pinned by digest): pml runs every stdio server in a container`)
	}
	var spec string
	var args []string
	if py, ok := pythonInstall(in.Command, in.Args); ok {
		// uvx NAME, python -m MODULE, pip install NAME: the derived
		// Python container (config.DerivePython), installed with pip
		// and locked by hash at its first install.
		if in.Integrity != "" {
			return fail("install.integrity", "is an npm package's integrity: a Python server is locked at its first install, every distribution by its sha256 (.pml/deps.json)")
		}
		s := config.Server{Name: f.Namespace, Type: TypeStdio, Command: py[0], Args: py[1:], Env: map[string]string{},
			EnvRequired: m.AllEnvRequired(), Workspace: "ro", Lifetime: "pooled", FromRegistry: true}
		if err := config.DerivePython(&s); err != nil {
			return fail("install.args", err.Error())
		}
		return withEntryFields(s, m, fail)
	}
	switch in.Command {
	case "npx":
		rest := in.Args
		for len(rest) > 0 && strings.HasPrefix(rest[0], "-") {
			if rest[0] == "-p" || strings.HasPrefix(rest[0], "--package") || rest[0] == "-c" || rest[0] == "--call" {
				return fail("install.args", fmt.Sprintf("uses npx's %s, which pml cannot turn into a container: give \"image\", \"command\" and \"args\"", rest[0]))
			}
			rest = rest[1:]
		}
		if len(rest) == 0 {
			return fail("install.args", "names no package to run")
		}
		spec, args = rest[0], rest[1:]
	case "npm":
		if len(in.Args) == 0 {
			return fail("install.args", "names no package to install")
		}
		spec = in.Args[len(in.Args)-1]
	default:
		return fail("image", fmt.Sprintf("is required for an install with %q: pml derives the container only for npm and npx packages and Python ones (uvx, pip install NAME, python -m MODULE)", in.Command))
	}
	name := npmspec.Name(spec)
	if name == "" || strings.HasPrefix(name, ".") || strings.Contains(name, "..") || strings.ContainsAny(name, ":\\ ") {
		return fail("install.args", fmt.Sprintf("%q is not an npm package", spec))
	}
	if in.Integrity != "" {
		if err := sri.Check(in.Integrity); err != nil {
			return fail("install.integrity", err.Error())
		}
	}
	// Without an integrity, an exact version is pinned as is; anything
	// else (the seeds' `npx -y @scope/server`, a range, a dist-tag) is
	// resolved by npm at the first install, whose version and integrity
	// are recorded and used by every later install (internal/deps).
	s := config.Server{
		Name:        f.Namespace,
		Type:        TypeStdio,
		Image:       NodeImage,
		Command:     "node",
		Args:        append([]string{"-e", nodeLauncher, name}, args...),
		Env:         map[string]string{},
		EnvRequired: m.AllEnvRequired(),
		Workspace:   "ro",
		Lifetime:    "pooled",
		Install: &config.Install{Command: "npm", Args: []string{"install", "--prefix", "/deps", "--no-audit", "--no-fund", spec},
			Integrity: in.Integrity, Package: name},
		FromRegistry: true,
	}
	return withEntryFields(s, m, fail)
}

// pythonInstall is an install step's command line as a Python server's
// (uvx NAME…, python -m MODULE…; pip install NAME is uvx NAME), ok when
// it is one.
func pythonInstall(command string, args []string) ([]string, bool) {
	switch command {
	case "uvx", "python", "python3":
		line := append([]string{command}, args...)
		return line, config.PythonCommand(command, args)
	case "pip", "pip3":
		if len(args) == 2 && args[0] == "install" {
			return []string{"uvx", args[1]}, true
		}
	}
	return nil, false
}

// withEntryFields adds the entry's own env, workspace and network to a
// derived server.
func withEntryFields(s config.Server, m *Metadata, fail func(key, problem string) (config.Server, error)) (config.Server, error) {
	for k, v := range m.Env {
		if !envNameRE.MatchString(k) {
			return fail("env", fmt.Sprintf("holds %q, which is not an environment variable name", k))
		}
		s.Env[k] = v
	}
	if m.Workspace == "none" {
		s.Workspace = "none"
	}
	if len(m.Network) > 0 {
		n, err := config.NewNetwork(m.Network, nil)
		if err != nil {
			return fail("network", strings.ReplaceAll(err.Error(), "\n", "; "))
		}
		s.Network = n
	}
	return s, nil
}

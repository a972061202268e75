package config

import (
	"fmt"
	"regexp"
	"strings"
)

// PythonImage is the image Python servers run in (images/python/build.sh):
// Debian bookworm's python3 and pip, built locally like pml/node:18.
const PythonImage = "pml/python:3.11"

// PythonPath is where a Python server's distributions are installed
// (pip install --target), on the server's read-only /deps.
const PythonPath = "/deps/site"

// PythonLauncher runs an installed distribution's console script as uvx
// would: argv[1] is the script's name, argv[2] the distribution it comes
// from; the script's entry point is loaded and called with the rest as
// its arguments. A distribution with one console script runs that one
// whatever its name.
const PythonLauncher = `import sys
from importlib import metadata as m
n, pkg = sys.argv[1], sys.argv[2]
e = list(m.entry_points(group="console_scripts", name=n))
if not e:
    try:
        e = [x for x in m.distribution(pkg).entry_points if x.group == "console_scripts"]
    except m.PackageNotFoundError:
        e = []
    if len(e) != 1:
        sys.stderr.write("pml: %s has no console script %s to run; declare the server in .pml.json with its command\n" % (pkg, n))
        sys.exit(2)
sys.argv = [e[0].name] + sys.argv[3:]
sys.exit(e[0].load()())
`

// pyNameRE is a Python distribution name with an optional version
// ("name", "name==1.2.3", "name@1.2.3", uvx's form).
var pyNameRE = regexp.MustCompile(`^([A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?)(?:(?:==|@)([A-Za-z0-9.!+_-]+))?$`)

// PythonCommand reports whether a server's command is one pml derives a
// Python container for when the entry names no image: uvx, and python
// (python3) -m MODULE.
func PythonCommand(command string, args []string) bool {
	switch command {
	case "uvx":
		return true
	case "python", "python3":
		return len(args) >= 2 && args[0] == "-m"
	}
	return false
}

// DerivePython is derivePython for a server built elsewhere (a registry
// entry's install step): s.Command and s.Args say how to run it.
func DerivePython(s *Server) error { return derivePython(s) }

// derivePython fills a server whose entry says how to run it as uvx or
// python -m would, without an image: it runs in PythonImage, installed
// with pip into /deps (every distribution locked by sha256 at its first
// install, internal/deps), its console script (uvx) or module (python
// -m) started with the entry's other arguments.
//
//	{"command": "uvx", "args": ["mcp-server-time", "--local-timezone", "UTC"]}
//	{"command": "uvx", "args": ["--from", "mcp-server-git==0.6.2", "mcp-server-git"]}
//	{"command": "python", "args": ["-m", "mcp_server_fetch"]}
func derivePython(s *Server) error {
	var req, script, pkg string
	var rest []string
	switch s.Command {
	case "uvx":
		args := s.Args
		from := ""
		for len(args) > 0 && strings.HasPrefix(args[0], "-") {
			switch {
			case args[0] == "--from" && len(args) > 1:
				from, args = args[1], args[2:]
			case strings.HasPrefix(args[0], "--from="):
				from, args = strings.TrimPrefix(args[0], "--from="), args[1:]
			default:
				return fmt.Errorf("uses uvx's %s, which pml cannot turn into a container: give \"image\", \"command\" and \"args\"", args[0])
			}
		}
		if len(args) == 0 {
			return fmt.Errorf("\"args\" names no package for uvx to run")
		}
		script, rest = args[0], args[1:]
		req = from
		if req == "" {
			req = script
		}
		m := pyNameRE.FindStringSubmatch(req)
		if m == nil {
			return fmt.Errorf("%q is not a Python package (NAME, NAME==VERSION or NAME@VERSION)", req)
		}
		pkg = m[1]
		if from == "" {
			script = pkg
		}
		if m[2] != "" {
			req = pkg + "==" + m[2]
		}
	default: // python -m MODULE
		mod := s.Args[1]
		if !regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_.]*$`).MatchString(mod) {
			return fmt.Errorf("%q is not a Python module", mod)
		}
		// The reference servers' modules are their distributions'
		// names with "-" as "_" (mcp_server_fetch, mcp-server-fetch).
		pkg = strings.ReplaceAll(strings.SplitN(mod, ".", 2)[0], "_", "-")
		req = pkg
		rest = s.Args[2:]
		s.Args = append([]string{"-m", mod}, rest...)
	}
	if s.Install != nil {
		return fmt.Errorf("has both %q and \"install\": a %s entry is installed by pml (pip, locked by hash); remove \"install\" or give \"image\"", s.Command, s.Command)
	}
	if s.Command == "uvx" {
		s.Args = append([]string{"-c", PythonLauncher, script, pkg}, rest...)
	}
	s.Image = PythonImage
	s.Command = "python3"
	if s.Env == nil {
		s.Env = map[string]string{}
	}
	if _, ok := s.Env["PYTHONPATH"]; !ok {
		s.Env["PYTHONPATH"] = PythonPath
	}
	s.Env["PYTHONDONTWRITEBYTECODE"] = "1"
	s.Install = &Install{Command: "pip", Args: []string{"install", req}, Package: pkg}
	return nil
}

// isPip reports whether an install command installs Python packages.
func isPip(command string) bool {
	switch command {
	case "pip", "pip3", "uv", "uvx", "pipx":
		return true
	}
	return false
}

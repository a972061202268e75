// Package clients knows where each MCP client keeps its server list and in
// which format, and adds or updates pml's entry there without touching
// anything else in the file: comments, order and the other servers stay.
//
// Every client is one Client value (the table in registry.go). A change is
// planned first (Plan: read, compute the new content) and written last
// (Edit.Write: under a lock on the file's directory, the file checked
// unchanged since it was read, the old file copied to <file>.backup, the
// new one written to a temporary file and renamed over it).
//
// Project files are read and written through internal/safefs, never
// through a symbolic link: a workspace may come from anyone. User files
// (in the home directory) are the user's own and may be links into a
// dotfiles repository: the link is followed and its target replaced.
package clients

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
)

// Scope is where a client's configuration lives.
type Scope string

const (
	// Project: a file in the workspace, shared with whoever checks it out.
	Project Scope = "project"
	// User: a file in the user's home, for every project.
	User Scope = "user"
)

// ServerName is pml's entry name in every client's file.
const ServerName = "pml"

// Server is how a client starts pml.
type Server struct {
	Command string
	Args    []string
	Env     map[string]string
}

// Env is the user's environment: where home and the configuration
// directories are. Tests point it at a temporary directory.
type Env struct {
	Home   string
	GOOS   string
	Getenv func(string) string
}

// OSEnv is the running process's environment.
func OSEnv() (Env, error) {
	home, err := os.UserHomeDir()
	if err != nil {
		return Env{}, fmt.Errorf("cannot find the home directory (set HOME): %w", err)
	}
	return Env{Home: home, GOOS: runtime.GOOS, Getenv: os.Getenv}, nil
}

func (e Env) getenv(k string) string {
	if e.Getenv == nil {
		return ""
	}
	return e.Getenv(k)
}

// xdgConfig is $XDG_CONFIG_HOME, else ~/.config (the XDG spec ignores a
// relative value).
func (e Env) xdgConfig() string {
	if d := e.getenv("XDG_CONFIG_HOME"); d != "" && filepath.IsAbs(d) {
		return d
	}
	return filepath.Join(e.Home, ".config")
}

// appData is where desktop applications keep their settings: Application
// Support on macOS, %APPDATA% on Windows, the XDG directory elsewhere.
func (e Env) appData() string {
	switch e.GOOS {
	case "darwin":
		return filepath.Join(e.Home, "Library", "Application Support")
	case "windows":
		if d := e.getenv("APPDATA"); d != "" {
			return d
		}
		return filepath.Join(e.Home, "AppData", "Roaming")
	}
	return e.xdgConfig()
}

func (e Env) home(parts ...string) string {
	return filepath.Join(append([]string{e.Home}, parts...)...)
}

// Client is one MCP client.
type Client struct {
	// Name is what --client takes.
	Name string
	// Title is how people call it.
	Title string
	// project is the file in the workspace ("" when the client has no
	// project-level configuration).
	project string
	// user is the user-level file.
	user func(Env) string
	// detect are the paths whose existence means the client is installed.
	detect func(Env) []string
	// format edits the file.
	format format
	// jsoncToo: the client also reads <file>c (opencode.jsonc), which is
	// used when it exists and <file> does not.
	jsoncToo bool
}

// Lookup finds a client by name.
func Lookup(name string) (*Client, error) {
	for _, c := range All {
		if c.Name == name {
			return c, nil
		}
	}
	return nil, fmt.Errorf("unknown client %q; known clients: %s", name, strings.Join(Names(), ", "))
}

// Names are the known clients' names, in the table's order.
func Names() []string {
	var out []string
	for _, c := range All {
		out = append(out, c.Name)
	}
	return out
}

// Scopes are the scopes the client has, project first.
func (c *Client) Scopes() []Scope {
	if c.project == "" {
		return []Scope{User}
	}
	return []Scope{Project, User}
}

// Has says whether the client has a configuration at scope.
func (c *Client) Has(s Scope) bool { return s == User || c.project != "" }

// DefaultScope is project where the client has one, else user.
func (c *Client) DefaultScope() Scope { return c.Scopes()[0] }

// Path is the client's file at scope for the workspace ws.
func (c *Client) Path(s Scope, ws string, env Env) (string, error) {
	var path string
	switch s {
	case Project:
		if c.project == "" {
			return "", fmt.Errorf("%s has no project-level configuration; use --scope user (%s)", c.Name, c.user(env))
		}
		path = filepath.Join(ws, filepath.FromSlash(c.project))
	case User:
		path = c.user(env)
	default:
		return "", fmt.Errorf("unknown scope %q: use project or user", s)
	}
	if c.jsoncToo {
		if _, err := os.Lstat(path); errors.Is(err, os.ErrNotExist) {
			if _, err := os.Lstat(path + "c"); err == nil {
				path += "c"
			}
		}
	}
	return path, nil
}

// ProjectFile is the project file relative to the workspace ("" if none).
func (c *Client) ProjectFile() string { return c.project }

// Installed says whether the client seems installed: one of its
// configuration directories exists. It is a guess, and says which path.
func (c *Client) Installed(env Env) (bool, string) {
	for _, p := range c.detect(env) {
		if _, err := os.Stat(p); err == nil {
			return true, p
		}
	}
	return false, ""
}

// State is whether pml is in a client's file.
type State string

const (
	// Configured: pml's entry is there, for this workspace (it names
	// none, or this one).
	Configured State = "configured"
	// Elsewhere: pml's entry is there and pins another workspace.
	Elsewhere State = "other-workspace"
	// Missing: no pml entry (or no file).
	Missing State = "not-configured"
	// Unreadable: the file exists but cannot be read or parsed.
	Unreadable State = "unreadable"
)

// Status is pml's state in one client file.
type Status struct {
	Scope State
	Path  string
	// Workspace is the workspace the entry names ("" when it names none).
	Workspace string
	// Command and Args are how the entry starts pml.
	Command string
	Args    []string
	Err     error
}

// Status reads the client's file at scope and says whether pml is
// configured there for the workspace ws.
func (c *Client) Status(s Scope, ws string, env Env) Status {
	path, err := c.Path(s, ws, env)
	if err != nil {
		return Status{Scope: Missing, Err: err}
	}
	st := Status{Path: path, Scope: Missing}
	data, exists, _, err := readFile(s, ws, path)
	if err != nil {
		st.Scope, st.Err = Unreadable, err
		return st
	}
	if !exists {
		return st
	}
	e, ok, err := c.format.entry(data)
	if err != nil {
		st.Scope, st.Err = Unreadable, fmt.Errorf("%s: %w", path, err)
		return st
	}
	if !ok {
		return st
	}
	st.Workspace = e.Env["PML_WORKSPACE"]
	st.Command, st.Args = e.Command, e.Args
	if st.Workspace == "" || st.Workspace == ws {
		st.Scope = Configured
	} else {
		st.Scope = Elsewhere
	}
	return st
}

// Edit is one planned change of one client's file.
type Edit struct {
	Client *Client
	Scope  Scope
	Path   string
	// ws is the workspace (the root for a project file).
	ws string
	// Exists: the file exists; Old is its content and mode.
	Exists bool
	Old    []byte
	mode   os.FileMode
	// New is the content to write.
	New []byte
	// Others are the other servers in the file, kept.
	Others []string
}

// Changed says whether writing would change the file.
func (e *Edit) Changed() bool { return !e.Exists || string(e.Old) != string(e.New) }

// Merge says whether an existing file would change (so it needs consent
// and is backed up).
func (e *Edit) Merge() bool { return e.Exists && e.Changed() }

// BackupPath is where Write copies the old file.
func (e *Edit) BackupPath() string { return e.Path + ".backup" }

// Plan reads the client's file at scope and computes the file with pml's
// entry set to srv. Nothing is written.
func (c *Client) Plan(s Scope, ws string, env Env, srv Server) (*Edit, error) {
	path, err := c.Path(s, ws, env)
	if err != nil {
		return nil, err
	}
	data, exists, mode, err := readFile(s, ws, path)
	if err != nil {
		return nil, err
	}
	e := &Edit{Client: c, Scope: s, Path: path, ws: ws, Exists: exists, Old: data, mode: mode}
	out, others, err := c.format.set(data, srv)
	if err != nil {
		return nil, fmt.Errorf("%s: %w\nNothing was changed. Fix the file (or move it away) and run pml init again", path, err)
	}
	e.New = out
	sort.Strings(others)
	e.Others = others
	return e, nil
}

// errChanged: the file changed between Plan and Write.
var errChanged = errors.New("changed since pml read it (another program is editing it?); nothing was written: run pml init again")

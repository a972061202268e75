package workspace

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
)

// systemTrees are directories no project lives in or under: mounting one
// into a tool container hands the host's configuration, programs or
// kernel interfaces to whatever runs there (Docker refusing some of these
// mounts is an accident of the engine, not a defence).
var systemTrees = []string{"/etc", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/boot", "/dev", "/proc", "/sys",
	"/System", "/private/etc"}

// systemDirs are directories that hold many things of many owners: they
// are refused themselves, while a project below them is fine
// (/usr/local/src/app, /var/www/site, /tmp/x).
var systemDirs = []string{"/usr", "/usr/local", "/usr/lib", "/usr/bin", "/usr/sbin", "/usr/share", "/usr/src", "/var", "/var/lib", "/var/log", "/run", "/tmp", "/var/tmp",
	"/home", "/root", "/opt", "/srv", "/mnt", "/media", "/snap", "/nix", "/Users", "/Library", "/Applications", "/Volumes",
	"/private", "/private/var", "/private/tmp"}

// Refused says why dir (absolute, symlinks resolved) cannot be a
// workspace, "" when it can. The workspace is mounted read-write into tool
// containers and holds the policy pml obeys: the filesystem root, the
// user's home (its dotfiles, keys and every other project) or a system
// directory must never be one, whichever way it was chosen. home is
// $HOME ("" when unknown).
func Refused(dir, home string) string {
	if runtime.GOOS == "windows" {
		if filepath.Dir(dir) == dir {
			return "it is the root of a drive"
		}
		return ""
	}
	dir = filepath.Clean(dir)
	if dir == "/" {
		return "it is the filesystem's root"
	}
	if home != "" && filepath.IsAbs(home) {
		h := filepath.Clean(home)
		if real, err := filepath.EvalSymlinks(h); err == nil {
			h = real
		}
		if dir == h {
			return "it is your home directory (" + h + "), which holds your keys, your dotfiles and every other project"
		}
		if rel, err := filepath.Rel(dir, h); err == nil && rel != "." && !strings.HasPrefix(rel, "..") {
			return "it holds your home directory (" + h + ")"
		}
	}
	for _, t := range systemTrees {
		if dir == t || strings.HasPrefix(dir, t+"/") {
			return "it is a system directory (" + t + ")"
		}
	}
	for _, d := range systemDirs {
		if dir == d {
			return "it is a system directory"
		}
	}
	return ""
}

// Home is the user's home directory for Refused ("" when unknown).
func Home(getenv func(string) string) string {
	if h := getenv("HOME"); h != "" {
		return h
	}
	h, _ := os.UserHomeDir()
	return h
}

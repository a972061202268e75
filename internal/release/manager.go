package release

import (
	"path/filepath"
	"strings"
)

// Manager is a package manager that owns an installed pml: pml upgrade
// leaves such a pml to it (replacing the file behind its back would make
// the manager's records lie, and its next upgrade or removal misbehave).
type Manager struct {
	// Name is the package manager's name in a sentence (Homebrew, a
	// Debian package, an RPM package, Scoop); ID the same as one word for
	// scripts (homebrew, deb, rpm, scoop: pml upgrade --format json).
	Name, ID string
	// Upgrade is the command that upgrades pml with it.
	Upgrade string
}

// Owner finds the package manager that installed the pml at exe (a path
// with its links resolved), or nil. owns asks the system's package
// databases (dpkg -S, rpm -qf) whether a package owns a path, naming the
// database that does; nil asks none.
func Owner(exe string, owns func(path string) (db string, ok bool)) *Manager {
	// Backslashes too: a Windows path is read the same on every host (tests).
	slash := strings.ReplaceAll(filepath.ToSlash(exe), `\`, "/")
	lower := strings.ToLower(slash)
	switch {
	case strings.Contains(slash, "/Cellar/") || strings.Contains(slash, "/homebrew/") || strings.Contains(slash, "/.linuxbrew/"):
		return &Manager{Name: "Homebrew", ID: "homebrew", Upgrade: "brew upgrade pml"}
	case strings.Contains(lower, "/scoop/apps/"):
		return &Manager{Name: "Scoop", ID: "scoop", Upgrade: "scoop update pml"}
	}
	if owns == nil {
		return nil
	}
	switch db, ok := owns(exe); {
	case !ok:
		return nil
	case db == "rpm":
		return &Manager{Name: "an RPM package", ID: "rpm", Upgrade: "sudo dnf upgrade pml (or install the new .rpm from the release)"}
	default:
		return &Manager{Name: "a Debian package", ID: "deb", Upgrade: "sudo apt-get install --only-upgrade pml (or sudo dpkg -i the new .deb from the release)"}
	}
}

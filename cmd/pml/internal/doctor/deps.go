package doctor

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/pml-dev/pml/internal/config"
	"github.com/pml-dev/pml/internal/deps"
	"github.com/pml-dev/pml/internal/safefs"
)

// The lock check of what is installed, shared by pml doctor's deps check
// and pml lock --check (cmd/pml/lock.go): every npm package recorded in
// .pml/deps.json with a version (an unpinned package resolved at its
// first install, or any npm install since) must still be that version
// with that integrity in .pml/deps. Drift (a hand-run npm install, a
// copied directory, an edited record) fails, so CI notices it.

// Lock entry states.
const (
	LockOK           = "ok"            // installed as recorded
	LockNotInstalled = "not_installed" // installed at that version on first use
	LockDrift        = "drift"         // installed otherwise than recorded
	// LockUnvouched: the record was not written by this user's pml here
	// (a repository's deps.json, an older pml's): it is not honoured,
	// and the server is installed again at its next use.
	LockUnvouched = "unvouched"
)

// LockEntry is one npm or Python package .pml/deps.json records with its
// version, checked against what .pml/deps holds (pml lock --format json).
type LockEntry struct {
	Server    string `json:"server"`
	Package   string `json:"package"`
	Version   string `json:"version"`
	Integrity string `json:"integrity"`
	State     string `json:"state"`
	// InstalledVersion and InstalledIntegrity are what .pml/deps holds,
	// for a drift; Error why it could not be read.
	InstalledVersion   string `json:"installed_version,omitempty"`
	InstalledIntegrity string `json:"installed_integrity,omitempty"`
	Error              string `json:"error,omitempty"`
	// Distributions is a Python server's lock: every distribution pip
	// installed, "name==version sha256:HEX".
	Distributions []string `json:"distributions,omitempty"`
}

// driftFix is what to run for a drift: the install goes, and the next
// use installs the recorded version, checked against its integrity.
func driftFix(server string) string {
	return fmt.Sprintf("delete .pml/deps/%s and use the server again: pml installs the version .pml/deps.json records and checks its integrity", server)
}

// Fix is what to run for the entry's state.
func (e LockEntry) Fix() string {
	if e.State == LockUnvouched {
		return fmt.Sprintf("use the server again (or run pml images pull): pml installs %s again and vouches for its record", e.Server)
	}
	return driftFix(e.Server)
}

// DriftText says what differs, without the fix.
func (e LockEntry) DriftText() string {
	if e.State == LockUnvouched {
		return fmt.Sprintf("%s: %s", e.Server, e.Error)
	}
	if e.Error != "" {
		return fmt.Sprintf("%s: %s", e.Server, e.Error)
	}
	return fmt.Sprintf("%s: %s is %s (%s) in .pml/deps, but %s (%s) is recorded", e.Server, e.Package, e.InstalledVersion, e.InstalledIntegrity, e.Version, e.Integrity)
}

// LockEntries reads .pml/deps.json in ws and checks each npm package it
// records with a version against .pml/deps, by server name.
func LockEntries(ctx context.Context, ws string) ([]LockEntry, error) {
	store := deps.NewStore(ws)
	recs, err := store.Records()
	if err != nil {
		return nil, err
	}
	out := []LockEntry{}
	for n, r := range recs {
		if ok, why := store.Vouched(n, r); !ok {
			out = append(out, LockEntry{Server: n, Package: r.Package, Version: r.Version, Integrity: r.Integrity, State: LockUnvouched,
				Error: "its record in .pml/deps.json is not honoured: " + why})
			continue
		}
		e := LockEntry{Server: n, Package: r.Package, Version: r.Version, Integrity: r.Integrity, State: LockOK}
		if _, err := safefs.Lstat(ws, store.Dir(n)); err != nil {
			e.State = LockNotInstalled
		} else if r.Version == "" || r.Package == "" {
			// Not an npm package with its version: only its files are
			// checked (below).
		} else if len(r.Python) > 0 {
			// A Python server: the lock in its tree is the set pip
			// installed, each distribution by its sha256.
			e.Distributions = pythonDists(r.Python)
			if integrity, err := deps.Integrity(ctx, ws, store.Dir(n), &config.Install{Command: "pip", Package: r.Package}); err != nil {
				e.State, e.Error = LockDrift, err.Error()
			} else if integrity != r.Integrity {
				e.State, e.InstalledVersion, e.InstalledIntegrity = LockDrift, r.Version, integrity
			}
		} else if version, integrity, err := installedNPM(ctx, ws, store.Dir(n), r.Package); err != nil {
			e.State, e.Error = LockDrift, err.Error()
		} else if version != r.Version || integrity != r.Integrity {
			e.State, e.InstalledVersion, e.InstalledIntegrity = LockDrift, version, integrity
		}
		if e.State == LockOK {
			// The tree as pml installed it (its start hashes it again too).
			if tree, err := deps.TreeSRI(ctx, ws, store.Dir(n), "sha256"); err != nil || tree != r.Tree {
				e.State, e.Error = LockDrift, fmt.Sprintf("the files of .pml/deps/%s changed since pml installed them", n)
			}
		}
		if e.State != LockDrift && (r.Version == "" || r.Package == "") {
			continue
		}
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Server < out[j].Server })
	return out, nil
}

// checkDeps is pml doctor's deps check: LockEntries as one check.
func checkDeps(ctx context.Context, ws string) Check {
	const name = "deps"
	entries, err := LockEntries(ctx, ws)
	if err != nil {
		return Check{"fail", name, err.Error(), "delete .pml/deps.json to install again"}
	}
	if len(entries) == 0 {
		return Check{"ok", name, "no npm package recorded with its version in .pml/deps.json", ""}
	}
	var drift, fine, fixes []string
	for _, e := range entries {
		switch e.State {
		case LockDrift, LockUnvouched:
			drift = append(drift, e.DriftText())
			fixes = append(fixes, e.Fix())
		case LockOK:
			fine = append(fine, e.Server+" "+e.Package+"@"+e.Version)
		}
	}
	if len(drift) > 0 {
		return Check{"fail", name, "installed packages differ from .pml/deps.json: " + strings.Join(drift, "; "), strings.Join(fixes, "; ")}
	}
	return Check{"ok", name, fmt.Sprintf("%d npm package(s) as recorded in .pml/deps.json: %s", len(fine), strings.Join(fine, ", ")), ""}
}

// pythonDists are a Python lock's distributions as "name==version
// sha256:HEX", for the person.
func pythonDists(dists []deps.PyDist) []string {
	out := make([]string, 0, len(dists))
	for _, d := range dists {
		out = append(out, d.Name+"=="+d.Version+" sha256:"+d.SHA256)
	}
	return out
}

// installedNPM reads the version and integrity of pkg as npm installed
// it in dir.
func installedNPM(ctx context.Context, ws, dir, pkg string) (version, integrity string, err error) {
	if version, err = deps.InstalledVersion(ctx, ws, dir, pkg); err != nil {
		return "", "", err
	}
	integrity, err = deps.Integrity(ctx, ws, dir, &config.Install{Command: "npm", Package: pkg})
	return version, integrity, err
}

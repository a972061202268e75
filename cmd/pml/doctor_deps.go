package main

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/pml-dev/pml/internal/config"
	"github.com/pml-dev/pml/internal/deps"
	"github.com/pml-dev/pml/internal/safefs"
)

// checkDeps is the lock check of what is installed (pml has no `pml lock`
// command; this is its --check): every npm package recorded in
// .pml/deps.json with a version (an unpinned package resolved at its
// first install, or any npm install since) must still be that version
// with that integrity in .pml/deps. Drift (a hand-run npm install, a
// copied directory) fails, so CI running pml doctor notices it.
func checkDeps(ctx context.Context, ws string) check {
	const name = "deps"
	store := deps.NewStore(ws)
	recs, err := store.Records()
	if err != nil {
		return check{"fail", name, err.Error(), "delete .pml/deps.json to install again"}
	}
	var names []string
	for n, r := range recs {
		if r.Version != "" && r.Package != "" {
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		return check{"ok", name, "no npm package recorded with its version in .pml/deps.json", ""}
	}
	sort.Strings(names)
	var drift, fine []string
	for _, n := range names {
		r := recs[n]
		dir := store.Dir(n)
		if _, err := safefs.Lstat(ws, dir); err != nil {
			continue // not installed here: installed (at that version) on first use
		}
		pkg := r.Package
		version, integrity, err := installedNPM(ctx, ws, dir, pkg)
		switch {
		case err != nil:
			drift = append(drift, fmt.Sprintf("%s: %v", n, err))
		case version != r.Version || integrity != r.Integrity:
			drift = append(drift, fmt.Sprintf("%s: %s is %s (%s) in .pml/deps, but %s (%s) is recorded", n, pkg, version, integrity, r.Version, r.Integrity))
		default:
			fine = append(fine, n+" "+pkg+"@"+version)
		}
	}
	if len(drift) > 0 {
		return check{"fail", name, "installed packages differ from .pml/deps.json: " + strings.Join(drift, "; "), "pml remove NAME --clean, then use the server again to install the recorded version"}
	}
	return check{"ok", name, fmt.Sprintf("%d npm package(s) as recorded in .pml/deps.json: %s", len(fine), strings.Join(fine, ", ")), ""}
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

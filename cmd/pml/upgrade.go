package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"

	"github.com/minio/selfupdate"
	"github.com/spf13/cobra"
	"golang.org/x/mod/semver"

	"github.com/pml-dev/pml/internal/release"
)

// exitUpgradeAvailable is pml upgrade --check's answer when a newer
// release exists (0: up to date).
const exitUpgradeAvailable = 10

// goInstallCmd is how a go install build upgrades.
const goInstallCmd = "go install github.com/pml-dev/pml/cmd/pml@latest"

func newUpgradeCmd(g *globals) *cobra.Command {
	var check bool
	var format string
	cmd := &cobra.Command{
		Use:   "upgrade",
		Short: "Replace this pml with the latest release",
		Long: `Finds the latest release (PML_RELEASES_URL, default ` + release.DefaultURL + `),
and when it is newer than this pml downloads the archive for this platform, checks it against
the release's checksums file (and, when cosign is installed, the checksums file against its
keyless signature by pml's release workflow; PML_VERIFY_SIGNATURE=0 skips that) and replaces this pml's executable with the one inside, atomically:
a failed download or a bad checksum leaves this pml as it was.

A pml installed by a package manager (Homebrew, a .deb or .rpm package, Scoop) or by go install
is left to that tool; pml upgrade names the command to use.

--check only reports: exit 0 when up to date, 10 when a newer release exists.

--format json prints one JSON object on stdout (with --check too, whatever the exit code):
{"executable", "current", "latest", "up_to_date", "upgraded", "installed_by" ("" for pml's own
install, else deb, rpm, homebrew, scoop, go install or source), "upgrade_command" (how to upgrade
a pml another tool installed or built; "" otherwise)}. A failure prints no document: its message is on
stderr and the exit code is 1.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f, err := outputFormat(cmd, format, false)
			if err != nil {
				return err
			}
			exe, err := os.Executable()
			if err == nil {
				exe, err = filepath.EvalSymlinks(exe)
			}
			if err != nil {
				return fmt.Errorf("finding this pml's executable: %w", err)
			}
			u := upgrader{exe: exe, built: built, base: os.Getenv("PML_RELEASES_URL"), owns: packageOwns,
				goos: runtime.GOOS, goarch: runtime.GOARCH, apply: applyBinary,
				cosign: lookCosign(), skipSignature: os.Getenv("PML_VERIFY_SIGNATURE") == "0",
				format: f, say: g.narration()}
			return u.run(cmd.Context(), cmd, check)
		},
	}
	cmd.Flags().BoolVar(&check, "check", false, "only report whether a newer release exists (exit 10 when one does)")
	addFormatFlag(cmd, &format, nil)
	return cmd
}

// upgrader is pml upgrade with what it touches made replaceable for tests.
type upgrader struct {
	exe, base    string
	built        versionInfo
	goos, goarch string
	owns         func(string) (string, bool)
	apply        func(exe string, bin []byte) error
	// cosign is the cosign program found on PATH ("" when none);
	// skipSignature is PML_VERIFY_SIGNATURE=0 (below).
	cosign        string
	skipSignature bool
	// format is --format (table when ""); say is where the checks the
	// download gets are told (cmd's stderr when nil).
	format string
	say    io.Writer
}

func (u upgrader) run(ctx context.Context, cmd *cobra.Command, check bool) error {
	out := cmd.OutOrStdout()
	// Another tool's pml: --check still answers (0 or 10, with that tool's
	// command); an upgrade is left to that tool.
	other, how, by := "", "", ""
	if m := release.Owner(u.exe, u.owns); m != nil {
		other, how, by = "installed by "+m.Name, m.Upgrade, m.ID
	} else if u.built.Built == builtGoInstall {
		other, how, by = "built by go install", goInstallCmd, "go install"
	}
	if other != "" && !check {
		return fmt.Errorf("this pml (%s) was %s; upgrade it with: %s", u.exe, other, how)
	}
	current := u.built.Version
	if u.built.Built == builtSource {
		// make build off a tag: git describe's v1.2.3-4-gabcdef0 is that
		// tag plus commits, so --check compares the tag.
		base, ok := describedTag(current)
		if !check || !ok {
			return fmt.Errorf("this pml's version %q is not a release version (a build from source), so pml upgrade cannot compare it with the releases; install a release instead (docs/install.md)", current)
		}
		current, other, how, by = base, "built from source", "build it from a newer checkout, or install the release (docs/install.md)", "source"
	}
	c, err := release.New(u.base)
	if err != nil {
		return err
	}
	latest, err := c.Latest(ctx)
	if err != nil {
		return err
	}
	newer, err := release.Newer(current, latest)
	if err != nil {
		return fmt.Errorf("this pml's version %q cannot be compared with %s: %w", u.built.Version, latest, err)
	}
	r := upgradeJSON{Executable: u.exe, Current: u.built.Version, Latest: latest, UpToDate: !newer, InstalledBy: by, Command: how}
	if !newer {
		return u.report(out, r, fmt.Sprintf("✓ Already up to date (%s; the latest release is %s)", u.built.Version, latest))
	}
	if check {
		text := fmt.Sprintf("A newer release exists: %s (this pml is %s); run pml upgrade", latest, u.built.Version)
		if other != "" {
			text = fmt.Sprintf("A newer release exists: %s (this pml is %s, %s); upgrade it with: %s", latest, u.built.Version, other, how)
		}
		if err := u.report(out, r, text); err != nil {
			return err
		}
		return &exitError{code: exitUpgradeAvailable}
	}
	u.verifier(c, cmd)
	asset := release.ArchiveName(u.goos, u.goarch)
	archive, err := c.Fetch(ctx, latest, asset)
	if err != nil {
		return fmt.Errorf("%w; this pml was left as it was", err)
	}
	bin, err := release.Binary(asset, archive)
	if err != nil {
		return fmt.Errorf("%w; this pml was left as it was", err)
	}
	if err := u.apply(u.exe, bin); err != nil {
		if errors.Is(err, fs.ErrPermission) {
			return fmt.Errorf("replacing %s: %w; this pml was left as it was: run pml upgrade as a user who may write to %s", u.exe, err, filepath.Dir(u.exe))
		}
		return fmt.Errorf("replacing %s: %w", u.exe, err)
	}
	r.Upgraded = true
	return u.report(out, r, fmt.Sprintf("✓ Upgraded from %s to %s", u.built.Version, latest))
}

// describedTag is the release tag a git-describe version starts from
// (v1.2.3 of v1.2.3-4-gabcdef0 or v1.2.3-dirty).
func describedTag(v string) (string, bool) {
	base := gitDescribed.ReplaceAllString(v, "")
	return base, base != v && semver.IsValid(base)
}

// applyBinary replaces exe with bin: selfupdate writes it beside exe and
// renames it over, keeping the old file until the rename succeeded and
// putting it back when it did not.
func applyBinary(exe string, bin []byte) error {
	err := selfupdate.Apply(bytes.NewReader(bin), selfupdate.Options{TargetPath: exe})
	if rerr := selfupdate.RollbackError(err); rerr != nil {
		return fmt.Errorf("%w, and putting the old pml back failed too (%v): reinstall pml (docs/install.md)", err, rerr)
	}
	return err
}

// packageOwns asks dpkg, then rpm, whether a package owns path.
func packageOwns(path string) (string, bool) {
	for _, q := range []struct{ db, cmd, flag string }{{"dpkg", "dpkg", "-S"}, {"rpm", "rpm", "-qf"}} {
		if _, err := exec.LookPath(q.cmd); err != nil {
			continue
		}
		// Exit 0: a package lists the path (dpkg -S and rpm -qf exit 1
		// when none does).
		if exec.Command(q.cmd, q.flag, path).Run() == nil {
			return q.db, true
		}
	}
	return "", false
}

// upgradeJSON is pml upgrade --format json (with --check too): what this
// pml is, what the latest release is, and what was done about it.
type upgradeJSON struct {
	Executable string `json:"executable"`
	Current    string `json:"current"`
	Latest     string `json:"latest"`
	UpToDate   bool   `json:"up_to_date"`
	// Upgraded: this run replaced the executable with the latest release.
	Upgraded bool `json:"upgraded"`
	// InstalledBy is what installed this pml ("" for pml's own install:
	// install.sh or an archive; deb, rpm, homebrew, scoop, go install,
	// source); Command how to upgrade it then.
	InstalledBy string `json:"installed_by"`
	Command     string `json:"upgrade_command"`
}

// report prints the result: r with --format json, else text for people.
func (u upgrader) report(w io.Writer, r upgradeJSON, text string) error {
	if u.format == formatJSON {
		return writeJSON(w, r)
	}
	_, err := fmt.Fprintln(w, text)
	return err
}

// lookCosign finds cosign on PATH ("" when it is not installed).
func lookCosign() string {
	p, _ := exec.LookPath("cosign")
	return p
}

// verifier sets c to check the checksums file's cosign signature when
// cosign is installed, and says on stderr which checks the download gets:
// the checksum always, the signature when it can.
func (u upgrader) verifier(c *release.Client, cmd *cobra.Command) {
	errOut := u.say
	if errOut == nil {
		errOut = cmd.ErrOrStderr()
	}
	switch {
	case u.skipSignature:
		fmt.Fprintf(errOut, "PML_VERIFY_SIGNATURE=0: the signature of %s is not verified, only the archive's checksum\n", release.ChecksumsFile)
	case u.cosign == "":
		fmt.Fprintf(errOut, "cosign is not installed: the signature of %s is not verified, only the archive's checksum (docs/install.md)\n", release.ChecksumsFile)
	default:
		c.Verify = release.Cosign{Path: u.cosign}.Verify
		fmt.Fprintf(errOut, "Verifying the signature of %s with %s\n", release.ChecksumsFile, u.cosign)
	}
}

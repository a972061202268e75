package main

import (
	"fmt"
	"regexp"
	"runtime"
	"runtime/debug"
	"strings"

	"golang.org/x/mod/semver"

	"github.com/spf13/cobra"
)

// How this pml was built, which decides what pml version prints and what
// pml upgrade may do.
const (
	// builtRelease: a release (GoReleaser; make build on a tag): -ldflags
	// set main.version to a semantic version.
	builtRelease = "release"
	// builtGoInstall: `go install github.com/pml-dev/pml/cmd/pml@vX`: no
	// ldflags, the module's version is in the build information.
	builtGoInstall = "go install"
	// builtSource: a build in a checkout: a plain go build (no version),
	// or make build off a tag (git describe's commit).
	builtSource = "source"
)

// versionInfo is what pml version prints; its JSON is the --format json
// output.
type versionInfo struct {
	Version  string `json:"version"`
	Revision string `json:"revision,omitempty"`
	Built    string `json:"built"`
	Go       string `json:"go"`
	OS       string `json:"os"`
	Arch     string `json:"arch"`
}

// buildVersion works out the version from what the linker set (ldVersion,
// ldCommit: empty or "dev" when nothing was set) and the binary's build
// information. A version given as a bare semantic version (GoReleaser's
// {{.Version}}: 1.2.3) is printed with its v, as tags are.
func buildVersion(ldVersion, ldCommit string, bi *debug.BuildInfo) versionInfo {
	v := versionInfo{Version: ldVersion, Revision: ldCommit, Built: builtRelease,
		Go: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH}
	if bi != nil && v.Revision == "" {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				v.Revision = s.Value[:12]
			}
		}
	}
	if v.Version == "" || v.Version == "dev" {
		v.Version, v.Built = "dev", builtSource
		// go install …@vX records the module's version; a build in a
		// checkout records "(devel)" (or nothing before Go 1.24's vcs stamping).
		if bi != nil && semver.IsValid(bi.Main.Version) {
			v.Version, v.Built = bi.Main.Version, builtGoInstall
		}
	}
	if !strings.HasPrefix(v.Version, "v") && semver.IsValid("v"+v.Version) {
		v.Version = "v" + v.Version
	}
	// make build stamps git describe: a commit (0b18ed3), or a tag with the
	// commits since (v1.2.3-4-gabcdef0, -dirty): builds from source, not
	// releases (and v1.2.3-4-g… would sort before the v1.2.3 it follows).
	if v.Built == builtRelease && (!semver.IsValid(v.Version) || gitDescribed.MatchString(v.Version)) {
		v.Built = builtSource
	}
	return v
}

// gitDescribed matches what git describe adds after a tag.
var gitDescribed = regexp.MustCompile(`-[0-9]+-g[0-9a-f]{4,}(-dirty)?$|-dirty$`)

func currentVersion() versionInfo {
	bi, _ := debug.ReadBuildInfo()
	return buildVersion(version, commit, bi)
}

// versionLine is the table output, shared by pml version and pml --version:
// "pml v1.2.3 (0123456789ab) go1.26.8 linux/amd64".
func versionLine() string {
	v := built
	rev := ""
	if v.Revision != "" {
		rev = " (" + v.Revision + ")"
	}
	return fmt.Sprintf("pml %s%s %s %s/%s", v.Version, rev, v.Go, v.OS, v.Arch)
}

func newVersionCmd() *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print pml's version (also pml --version)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f, err := outputFormat(cmd, format, false)
			if err != nil {
				return err
			}
			if f == formatJSON {
				return writeJSON(cmd.OutOrStdout(), built)
			}
			_, err = fmt.Fprintln(cmd.OutOrStdout(), versionLine())
			return err
		},
	}
	addFormatFlag(cmd, &format, nil)
	return cmd
}

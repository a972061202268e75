package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// versionInfo is what pml version prints; its JSON is the --format json
// output.
type versionInfo struct {
	Version  string `json:"version"`
	Revision string `json:"revision,omitempty"`
	Go       string `json:"go"`
	OS       string `json:"os"`
	Arch     string `json:"arch"`
}

func currentVersion() versionInfo {
	v := versionInfo{Version: version, Go: runtime.Version(), OS: runtime.GOOS, Arch: runtime.GOARCH}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				v.Revision = s.Value[:12]
			}
		}
	}
	return v
}

// versionLine is the table output, shared by pml version and pml --version.
func versionLine() string {
	v := currentVersion()
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
				return writeJSON(cmd.OutOrStdout(), currentVersion())
			}
			_, err = fmt.Fprintln(cmd.OutOrStdout(), versionLine())
			return err
		},
	}
	addFormatFlag(cmd, &format, nil)
	return cmd
}

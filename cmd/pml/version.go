package main

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/spf13/cobra"
)

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print pml's version",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			rev := ""
			if bi, ok := debug.ReadBuildInfo(); ok {
				for _, s := range bi.Settings {
					if s.Key == "vcs.revision" && len(s.Value) >= 12 {
						rev = " (" + s.Value[:12] + ")"
					}
				}
			}
			fmt.Fprintf(cmd.OutOrStdout(), "pml %s%s %s %s/%s\n", version, rev, runtime.Version(), runtime.GOOS, runtime.GOARCH)
		},
	}
}

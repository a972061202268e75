package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/pml-dev/pml/images"
	"github.com/pml-dev/pml/internal/docker"
)

func newImagesCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "images", Short: "Manage the images pml runs tools in"}
	var (
		busybox string
		force   bool
	)
	build := &cobra.Command{
		Use:   "build",
		Short: "Build pml's own images locally, without a registry",
		Long:  "Build the toolbox image from this pml executable (it must be static: CGO_ENABLED=0) and the shell image from a static busybox (Debian's busybox-static).",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			rt, err := docker.New()
			if err != nil {
				return &exitError{5, err}
			}
			defer rt.Close()
			exe, err := os.Executable()
			if err != nil {
				return err
			}
			tb := &images.Toolbox{Runtime: rt, Exe: exe}
			ref, err := tb.Ensure(cmd.Context())
			if err != nil {
				return &exitError{5, err}
			}
			fmt.Fprintln(os.Stderr, "toolbox image:", ref)
			if busybox != "" {
				// Rebuilding an image that is there only leaves the old one
				// dangling; --force replaces it on purpose.
				exists, err := rt.ImageExists(cmd.Context(), images.ShellRef)
				if err != nil {
					return &exitError{5, err}
				}
				if !exists || force {
					if err := images.BuildShell(cmd.Context(), rt, busybox, images.ShellRef); err != nil {
						return &exitError{5, err}
					}
				}
				fmt.Fprintln(os.Stderr, "shell image:", images.ShellRef)
			}
			return nil
		},
	}
	build.Flags().BoolVar(&force, "force", false, "rebuild the shell image even when it exists")
	build.Flags().StringVar(&busybox, "busybox", "", "static busybox to build the shell image from (e.g. /bin/busybox from busybox-static)")
	cmd.AddCommand(build)
	return cmd
}

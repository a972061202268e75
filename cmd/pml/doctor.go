package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/pml-dev/pml/cmd/pml/internal/doctor"
)

// newDoctorCmd is pml doctor; its checks are package doctor's.
func newDoctorCmd(g *globals) *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Check that pml can run here, with a fix for each problem",
		Long: "Check that pml can run here, with a fix for each problem. Exits 1 when a check fails (warnings do not). " +
			"--format json prints one JSON object with every check, for CI to gate on.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f, err := outputFormat(cmd, format, false)
			if err != nil {
				return err
			}
			checks := doctor.Run(cmd.Context(), g.host)
			var failed int
			if f == formatJSON {
				r := doctor.NewReport(checks)
				failed, err = r.Failed, writeJSON(cmd.OutOrStdout(), r)
			} else {
				failed = doctor.Print(cmd.OutOrStdout(), checks)
			}
			if err != nil {
				return err
			}
			if failed > 0 {
				return &exitError{1, fmt.Errorf("%d check(s) failed", failed)}
			}
			return nil
		},
	}
	addFormatFlag(cmd, &format, nil)
	return cmd
}

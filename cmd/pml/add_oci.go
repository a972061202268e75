package main

import (
	"errors"

	"github.com/spf13/cobra"
)

func addOCI(cmd *cobra.Command, g *globals, ref string, o addServerOptions) error {
	return &exitError{2, errors.New("oci: is not supported yet")}
}

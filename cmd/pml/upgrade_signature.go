package main

import (
	"fmt"
	"os/exec"

	"github.com/spf13/cobra"

	"github.com/pml-dev/pml/internal/release"
)

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

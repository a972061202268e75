package release

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// SignatureFile is the release's Sigstore bundle for its checksums file:
// cosign's keyless signature made by the release workflow
// (.github/workflows/release.yml) with its GitHub OIDC identity.
const SignatureFile = ChecksumsFile + ".sigstore.json"

// The identity a release's signature must carry: the release workflow of
// pml's repository, run for a v* tag, as GitHub's OIDC issuer vouches. A
// mirror (PML_RELEASES_URL) serves the same files, so the same identity.
const (
	SignerIdentity = `^https://github\.com/pml-dev/pml/\.github/workflows/release\.yml@refs/tags/v`
	SignerIssuer   = "https://token.actions.githubusercontent.com"
)

// Cosign verifies the checksums file's signature with the cosign program
// at Path (cosign v3: the bundle format GoReleaser's cosign sign-blob
// --bundle writes).
type Cosign struct{ Path string }

// Verify checks bundle as the signature of sums by pml's release workflow.
func (c Cosign) Verify(ctx context.Context, sums, bundle []byte) error {
	dir, err := os.MkdirTemp("", "pml-verify-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	sumsPath, bundlePath := filepath.Join(dir, ChecksumsFile), filepath.Join(dir, SignatureFile)
	if err := os.WriteFile(sumsPath, sums, 0o600); err != nil {
		return err
	}
	if err := os.WriteFile(bundlePath, bundle, 0o600); err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, c.Path, CosignArgs(bundlePath, sumsPath)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(out.String())
		if i := strings.LastIndexByte(msg, '\n'); i >= 0 {
			msg = msg[i+1:]
		}
		return fmt.Errorf("%s is not a valid signature of %s by pml's release workflow (cosign: %v: %s): the release may have been tampered with", SignatureFile, ChecksumsFile, err, msg)
	}
	return nil
}

// CosignArgs is the cosign command line that verifies a checksums file
// (install.sh runs the same one).
func CosignArgs(bundle, sums string) []string {
	return []string{"verify-blob", "--bundle", bundle,
		"--certificate-identity-regexp", SignerIdentity,
		"--certificate-oidc-issuer", SignerIssuer, sums}
}

//go:build linux

package e2e

import (
	"fmt"
	"os"
	"testing"

	"github.com/pml-dev/pml/internal/container"
	"github.com/pml-dev/pml/internal/container/containertest"
	"github.com/pml-dev/pml/internal/docker"
	"github.com/pml-dev/pml/policies"
)

// TestTheDockerRuntimeKeepsTheRuntimeContract checks the Docker runtime
// against the contract written on container.Runtime, with the same checks
// the shared fake passes (containertest.Contract): so the fake the unit
// tests use behaves, where they rely on it, as the real engine does.
func TestTheDockerRuntimeKeepsTheRuntimeContract(t *testing.T) {
	rt, err := docker.New()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { rt.Close() })
	dir := t.TempDir()
	t.Cleanup(func() { assertNoContainers(t, dir) })
	uid := os.Geteuid()
	if uid == 0 {
		uid = testUID
	}
	spec := func(argv ...string) container.Spec {
		return container.Spec{
			Image:      "pml/shell:busybox",
			Entrypoint: argv,
			User:       fmt.Sprintf("%d:%d", uid, uid),
			Policy:     policies.Default(),
			Labels: map[string]string{
				container.LabelManaged:   "true",
				container.LabelWorkspace: dir,
				container.LabelPurpose:   "runtime-contract",
			},
		}
	}
	containertest.Contract(t, rt, containertest.ContractSpecs{
		Cat:   spec("/bin/busybox", "cat"),
		Sleep: spec("/bin/busybox", "sleep", "300"),
		Exit3: spec("/bin/busybox", "sh", "-c", "echo bye >&2; exit 3"),
	})
}

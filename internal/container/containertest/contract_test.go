package containertest

import (
	"testing"

	"github.com/pml-dev/pml/internal/container"
)

func TestTheFakeKeepsTheRuntimeContract(t *testing.T) {
	Contract(t, &Runtime{Behave: ContractBehave}, ContractSpecs{
		Cat:   container.Spec{Cmd: []string{"cat"}},
		Sleep: container.Spec{Cmd: []string{"sleep"}},
		Exit3: container.Spec{Cmd: []string{"exit3"}},
	})
}

func TestTheLimitedRuntimeKeepsTheContract(t *testing.T) {
	Contract(t, container.Limit(&Runtime{Behave: ContractBehave}, 8), ContractSpecs{
		Cat:   container.Spec{Cmd: []string{"cat"}},
		Sleep: container.Spec{Cmd: []string{"sleep"}},
		Exit3: container.Spec{Cmd: []string{"exit3"}},
	})
}

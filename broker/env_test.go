package broker

import (
	"slices"
	"testing"

	"github.com/pml-dev/pml/internal/config"
)

func TestARegistryEntrysEnvIsLiteral(t *testing.T) {
	t.Setenv("E2E_SECRET_X", "secret-x")
	t.Setenv("E2E_NEEDED", "needed-value")
	f := newFixture(t, "")
	reg := config.Server{Name: "r", FromRegistry: true,
		Env:         map[string]string{"X": "${E2E_SECRET_X}", "E2E_NEEDED": "${E2E_SECRET_X}"},
		EnvRequired: []string{"E2E_NEEDED"}}
	env, err := f.b.sb.envFor(reg)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(env)
	if want := []string{"E2E_NEEDED=needed-value", "X=${E2E_SECRET_X}"}; !slices.Equal(env, want) {
		t.Fatalf("registry env %v, want %v", env, want)
	}
	// The user's own .pml.json server keeps ${NAME}.
	own := config.Server{Name: "o", Env: map[string]string{"X": "${E2E_SECRET_X}"}}
	if env, err := f.b.sb.envFor(own); err != nil || !slices.Equal(env, []string{"X=secret-x"}) {
		t.Fatalf("own server env %v %v", env, err)
	}
}

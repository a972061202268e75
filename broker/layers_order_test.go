package broker

import (
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/pml-dev/pml/broker/call"
	"github.com/pml-dev/pml/internal/config"
	"github.com/pml-dev/pml/internal/container/containertest"
)

// The chain New builds (path.go) runs the layers in call.Layers' order,
// the order the docs are checked against (call/layers_test.go).
func TestTheChainRunsTheLayersInOrder(t *testing.T) {
	ws := t.TempDir()
	cfg, err := config.Load(ws, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	b, err := New(Options{Workspace: ws, Config: cfg, Runtime: &containertest.Runtime{}, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close(time.Second)
	whole, _ := b.chain()
	var got []string
	for h := reflect.ValueOf(whole); h.IsValid(); {
		for h.Kind() == reflect.Interface || h.Kind() == reflect.Pointer {
			if h.IsNil() {
				break
			}
			h = h.Elem()
		}
		if h.Kind() != reflect.Struct {
			break
		}
		name := strings.ToLower(h.Type().PkgPath()[strings.LastIndex(h.Type().PkgPath(), "/")+1:] + "." + h.Type().Name())
		name, _, _ = strings.Cut(name, "[") // a generic layer's type arguments
		// Only the layers count: a wrapper within a step (approve.Network,
		// the network approval around execute) is walked through.
		for _, l := range call.Layers {
			if strings.HasSuffix(name, "layer") && strings.Contains(name, l) {
				got = append(got, l)
				break
			}
		}
		next := h.FieldByName("Next")
		if !next.IsValid() {
			next = h.FieldByName("next")
		}
		h = next
	}
	if !slices.Equal(got, call.Layers) {
		t.Errorf("the chain runs %v, call.Layers says %v", got, call.Layers)
	}
}

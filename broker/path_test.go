package broker

import (
	"context"
	"errors"
	"testing"

	"github.com/pml-dev/pml/broker/call"
)

// The resolve and registry layers (package tools) as path.go wires them
// to the broker's sources.

func TestResolveLayerFailsUnknownNamesOnly(t *testing.T) {
	f := newFixture(t, "")
	for _, tc := range []struct {
		tool    string
		reached int
	}{
		{"filesystem:read_file", 1}, {"shell:exec", 1}, {"nosuchtool", 0}, {"filesystem:nope", 0},
	} {
		next := &fakeNext{}
		c := &call.Call{Tool: tc.tool}
		res := resolveLayerOf(f.b, next).Call(context.Background(), c)
		if next.reached != tc.reached {
			t.Errorf("%s: reached %d (%s)", tc.tool, next.reached, res.Text)
		}
		if tc.reached == 0 && !errors.Is(res.Err(), call.ErrNotFound) {
			t.Errorf("%s: %+v", tc.tool, res)
		}
	}
}

func TestRegistryLayerPassesLocalToolsThrough(t *testing.T) {
	f := newFixture(t, "")
	next := &fakeNext{}
	registryLayerOf(f.b, next).Call(context.Background(), &call.Call{Tool: "filesystem:read_file"})
	if next.reached != 1 {
		t.Fatal("a local tool did not go through")
	}
}

package broker

import (
	"context"
	"testing"
)

func TestRegistryLayerPassesLocalToolsThrough(t *testing.T) {
	f := newFixture(t, "")
	next := &fakeNext{}
	registryLayerOf(f.b, next).Call(context.Background(), &Call{Tool: "filesystem:read_file"})
	if next.reached != 1 {
		t.Fatal("a local tool did not go through")
	}
}

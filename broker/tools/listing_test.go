package tools

import (
	"testing"
)

func TestImageVersion(t *testing.T) {
	for ref, want := range map[string]string{
		"pml/node:18":                  "18",
		"localhost:5000/x/y":           "latest",
		"localhost:5000/x/y:v1":        "v1",
		"x/y@sha256:0123456789abcdef0": "sha256:0123456789ab",
		"x/y:v1@sha256:abc":            "sha256:abc",
	} {
		if got := imageVersion(ref); got != want {
			t.Errorf("imageVersion(%q) = %q, want %q", ref, got, want)
		}
	}
}

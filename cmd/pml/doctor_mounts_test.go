package main

import (
	"strings"
	"testing"

	"github.com/pml-dev/pml/internal/config"
)

// pml doctor shows the extra mounts in force, and that they are not yet
// given to containers.
func TestDoctorShowsTheExtraMounts(t *testing.T) {
	cfg := &config.Config{Servers: map[string]config.Server{"m": {Mounts: []config.Mount{{Source: "/opt/f", Target: "/f", ReadOnly: true}}}}}
	cfg.Sandbox.Mounts = []config.Mount{{Source: "/data", Target: "/data", ReadOnly: true}}
	c, ok := checkExtraMounts(cfg)
	if !ok || !strings.Contains(c.detail, "/data (ro)") || !strings.Contains(c.detail, "/opt/f → /f (ro) for m") || !strings.Contains(c.detail, "not yet mounted") {
		t.Errorf("%+v", c)
	}
	if _, ok := checkExtraMounts(&config.Config{}); ok {
		t.Error("a check without mounts")
	}
}

package tools

import (
	"errors"
	"slices"
	"testing"

	"github.com/pml-dev/pml/broker/call"
	"github.com/pml-dev/pml/internal/config"
	"github.com/pml-dev/pml/internal/container"
	"github.com/pml-dev/pml/internal/container/containertest"
)

// prestartSources configures servers whose first call would start them
// unasked (ok, ok2) beside one for each reason to leave a server to its
// first call.
func prestartSources(t *testing.T, rt container.Runtime) *sources {
	servers := map[string]config.Server{
		"ok":           {Name: "ok", Image: "img"},
		"ok2":          {Name: "ok2", Image: "img"},
		"asks":         {Name: "asks", Image: "img"},
		"denied":       {Name: "denied", Image: "img"},
		"percall":      {Name: "percall", Image: "img", Lifetime: "per_call"},
		"needsvar":     {Name: "needsvar", Image: "img", EnvRequired: []string{"TOKEN"}},
		"notinstalled": {Name: "notinstalled", Image: "img", Install: &config.Install{Command: "npm", Args: []string{"i", "x"}, Integrity: "sha512-x"}},
	}
	perms := fakePerms{"ok:*": call.Allow, "ok2:*": call.Allow, "denied:*": call.Deny, "percall:*": call.Allow,
		"needsvar:*": call.Allow, "notinstalled:*": call.Allow}
	// The servers are added once the sandbox has its engine (each
	// server's session takes it when it is made).
	s := newSources(t, nil, perms)
	s.sb.rt = rt
	for _, name := range []string{"asks", "denied", "needsvar", "notinstalled", "ok", "ok2", "percall"} {
		s.servers.Add(servers[name])
	}
	return s
}

// Only the servers a call could start without a question are
// pre-started: not one that asks, is denied, runs per call, lacks a
// variable or is not installed.
func TestPrestartStartsOnlyWhatACallCouldStartUnasked(t *testing.T) {
	rt := &containertest.Runtime{StartErr: errors.New("no engine here")}
	s := prestartSources(t, rt)
	got := s.servers.Prestart("")
	slices.Sort(got)
	if !slices.Equal(got, []string{"ok", "ok2"}) {
		t.Fatalf("pre-started %v, want [ok ok2]", got)
	}
	if got := s.servers.Prestart("ok2"); len(got) > 1 || (len(got) == 1 && got[0] != "ok2") {
		t.Errorf("Prestart(ok2) started %v", got)
	}
}

// Two container slots stay free for calls: with a cap of 3 only one
// server is pre-started.
func TestPrestartLeavesTwoContainerSlotsForCalls(t *testing.T) {
	rt := container.Limit(&containertest.Runtime{StartErr: errors.New("no engine here")}, 3)
	s := prestartSources(t, rt)
	if got := s.servers.Prestart(""); len(got) != 1 {
		t.Fatalf("pre-started %v with 3 slots, want one server", got)
	}
}

package broker

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/pml-dev/pml/broker/workflow"
	"github.com/pml-dev/pml/internal/config"
	"github.com/pml-dev/pml/internal/container"
)

// engineSays is the in-process runtime with the Info of an engine.
type engineSays struct {
	*inProcess
	info container.Info
}

func (e engineSays) Info(context.Context) (container.Info, error) { return e.info, nil }

func brokerOnEngine(t *testing.T, pmlJSON string, info container.Info) *fixture {
	t.Helper()
	ws, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string]string{".pml.json": pmlJSON, "a.txt": "hello"} {
		if err := os.WriteFile(filepath.Join(ws, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := config.Load(ws, func(string) string { return "" })
	if err != nil {
		t.Fatal(err)
	}
	rt := &inProcess{}
	b, err := New(Options{Workspace: ws, Config: cfg, Runtime: engineSays{rt, info}, Inside: testInside, Logger: zerolog.Nop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close(time.Second) })
	return &fixture{ws: ws, b: b, rt: rt, wf: workflow.NewWorkflows(cfg.HIL.Timeout)}
}

// auditLimits maps each audited tool to its entry's limits field.
func auditLimits(t *testing.T, ws string) map[string]string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(ws, ".pml", "audit.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var e struct{ Tool, Limits string }
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatal(err)
		}
		out[e.Tool] = e.Limits
	}
	return out
}

// On an engine that ignores the limits (rootless Podman on cgroup v1),
// the approval and the audit entry say so; on one that enforces them,
// neither mentions them.
func TestLimitsAnEngineIgnoresAreNeverClaimed(t *testing.T) {
	ignoring := container.Info{Engine: "rootless Podman", Rootless: true, CgroupVersion: "1", Unenforced: []string{"memory", "cpus", "pids"}}
	for _, tc := range []struct {
		info container.Info
		want string
	}{
		{ignoring, "not enforced: rootless Podman on cgroup v1 ignores the memory, cpus, pids limits"},
		{container.Info{Engine: "Docker Engine", CgroupVersion: "2"}, ""},
	} {
		f := brokerOnEngine(t, `{"permissions": {"allow": ["filesystem:read_file"], "ask": ["shell:exec"]}}`, tc.info)
		if r := f.call(t, "filesystem:read_file", map[string]any{"path": "a.txt"}); r.IsError {
			t.Fatalf("read_file: %+v", r)
		}
		a := approvalOf(t, f.call(t, "shell:exec", map[string]any{"command": "true"}))
		if tc.want != "" && (!strings.Contains(a.Description, "limits: "+tc.want) || a.Context["limits"] != tc.want) {
			t.Errorf("%s: the approval does not say the limits are not enforced: %q %v", tc.info.Engine, a.Description, a.Context)
		}
		if tc.want == "" && (strings.Contains(a.Description, "limits") || a.Context["limits"] != nil) {
			t.Errorf("%s: the approval mentions limits the engine enforces: %q", tc.info.Engine, a.Description)
		}
		if got := auditLimits(t, f.ws)["filesystem:read_file"]; got != tc.want {
			t.Errorf("%s: audit limits %q, want %q", tc.info.Engine, got, tc.want)
		}
	}
}

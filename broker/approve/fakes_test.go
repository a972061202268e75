package approve

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/rs/zerolog"

	"github.com/pml-dev/pml/broker/call"
	"github.com/pml-dev/pml/broker/permit"
	sbx "github.com/pml-dev/pml/broker/sandbox"
	"github.com/pml-dev/pml/internal/audit"
	"github.com/pml-dev/pml/internal/config"
	"github.com/pml-dev/pml/internal/deps"
	"github.com/pml-dev/pml/internal/protect"
)

// fakes is an Approver over fakes of what it asks of the rest of pml: an
// execute step that records what it ran, and the parts (interfaces.go).
type fakes struct {
	ap    *Approver
	exec  *fakeExec
	parts *fakeParts
	ws    string
}

func newFakes(t *testing.T) *fakes {
	t.Helper()
	ws := t.TempDir()
	log := zerolog.Nop()
	guard := protect.New(ws, nil, log)
	t.Cleanup(guard.Close)
	egress := sbx.NewEgressSet(nil, log, fmt.Sprintf("%d:%d", os.Getuid(), os.Getgid()))
	t.Cleanup(func() { egress.Close(context.Background()) })
	exec := &fakeExec{}
	parts := &fakeParts{servers: map[string]config.Server{}, missing: map[string][]string{}, cloud: map[string]bool{}, cloudOn: true}
	ap := &Approver{
		Config:      &config.Config{Path: filepath.Join(ws, ".pml.json")},
		Workspace:   ws,
		Guard:       guard,
		Egress:      egress,
		Perms:       permit.NewLivePermissions(permit.Permissions{Ask: []string{"filesystem:write_file"}}, "test"),
		TrustState:  &permit.TrustState{},
		Deps:        deps.NewStore(ws),
		Log:         &log,
		Sandbox:     parts,
		Servers:     parts,
		Cloud:       parts,
		Integrity:   parts,
		Reload:      func(func(string) string) {},
		ShellTool:   "shell:exec",
		ExecuteTool: "pml:execute",
	}
	ap.Execute = Network{Next: exec, Ask: ap}
	return &fakes{ap: ap, exec: exec, parts: parts, ws: ws}
}

// ran is one call that reached the execute step.
type ran struct{ tool, pattern string }

// fakeExec is the execute step: it records the calls that reach it,
// notes each as allowed (as the broker's does) and answers "ran". during,
// when set, plays what the tool does while it runs (an egress refusal).
type fakeExec struct {
	mu     sync.Mutex
	ran    []ran
	during func(c *Call)
}

func (e *fakeExec) Call(_ context.Context, c *Call) Result {
	e.mu.Lock()
	e.ran = append(e.ran, ran{c.Tool, c.Pattern})
	during := e.during
	e.mu.Unlock()
	if during != nil {
		during(c)
	}
	c.Note(audit.Entry{Tool: c.Tool, Decision: audit.Allowed, Pattern: c.Pattern, ExitStatus: "ok"})
	return Result{Text: "ran"}
}

func (e *fakeExec) runs() []ran {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]ran(nil), e.ran...)
}

// fakeParts fakes the sandbox, the servers, the cloud and the registry's
// integrity check.
type fakeParts struct {
	servers  map[string]config.Server
	cloud    map[string]bool
	missing  map[string][]string
	cloudOn  bool
	local    int
	approved []string // the workflows ApproveIntegrity carried out
}

func (p *fakeParts) LimitsNote(context.Context) string { return "" }
func (p *fakeParts) OwnVariable(name string) bool      { return name == "PML_WORKSPACE" }

func (p *fakeParts) ServerOf(tool string) (config.Server, bool) {
	for ns, srv := range p.servers {
		if len(tool) > len(ns) && tool[:len(ns)+1] == ns+":" {
			return srv, true
		}
	}
	return config.Server{}, false
}

func (p *fakeParts) IsCloudTool(tool string) bool                        { return p.cloud[tool] }
func (p *fakeParts) MissingKeys(_ context.Context, tool string) []string { return p.missing[tool] }
func (p *fakeParts) Enabled() bool                                       { return p.cloudOn }
func (p *fakeParts) Local(context.Context, string, map[string]any) Result {
	p.local++
	return Result{Text: "local mode", IsError: true}
}
func (p *fakeParts) APIKeyApproval(wf *Workflow) Approval {
	return Approval{ApprovalType: wf.Type, WorkflowID: wf.ID, Tool: wf.Tool, Description: "give the key"}
}
func (p *fakeParts) IntegrityApproval(wf *Workflow) Approval {
	return Approval{ApprovalType: wf.Type, WorkflowID: wf.ID, Tool: wf.Tool, Description: "the entry changed"}
}
func (p *fakeParts) ApproveIntegrity(_ context.Context, _ *Call, _ *Workflows, wf *Workflow) Result {
	p.approved = append(p.approved, wf.ID)
	return Result{Text: "integrity approved"}
}

var (
	_ Sandbox   = (*fakeParts)(nil)
	_ Servers   = (*fakeParts)(nil)
	_ Cloud     = (*fakeParts)(nil)
	_ Integrity = (*fakeParts)(nil)
	_ Resumer   = (*networkGrant)(nil)
	_ Handler   = Network{}
	_ Handler   = Layer{}
	_           = call.ContinueTool
)

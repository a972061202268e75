package coderun

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/pml-dev/pml/broker/approve"
	"github.com/pml-dev/pml/broker/call"
	"github.com/pml-dev/pml/broker/permit"
	sbx "github.com/pml-dev/pml/broker/sandbox"
	"github.com/pml-dev/pml/broker/workflow"
	"github.com/pml-dev/pml/internal/audit"
	"github.com/pml-dev/pml/internal/config"
	"github.com/pml-dev/pml/internal/deps"
	"github.com/pml-dev/pml/internal/execute"
	"github.com/pml-dev/pml/internal/netallow"
)

// A workflow payload that carries out the answer itself (approve.Resumer)
// has two implementations: a paused code run (PausedCall, here) and a
// network approval (approve's networkGrant). Both keep one contract,
// checked on each below: the answer is applied once, an approved call runs
// through the approver's Execute handler and a rejected one runs nothing,
// and the answering call's one entry names the workflow.

// pending is a workflow whose payload is a Resumer, and what ran through
// the approver's Execute since it was opened.
type pending struct {
	ap  *approve.Approver
	wfs *workflow.Workflows
	id  string
	ran func() int
}

func TestEveryResumerKeepsTheContract(t *testing.T) {
	for name, open := range map[string]func(t *testing.T) pending{
		"a paused code run (coderun.PausedCall)": pausedRun,
		"a network approval (approve.Network)":   networkApproval,
	} {
		for _, approved := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s, approved %v", name, approved), func(t *testing.T) {
				p := open(t)
				ans := call.NewCall(call.Request{Tool: call.ContinueTool, Workflows: p.wfs})
				ans.Cont = &workflow.Continuation{WorkflowID: p.id, Approved: approved}
				p.ap.AnswerCall(context.Background(), ans)
				want := 0
				if approved {
					want = 1
				}
				if got := p.ran(); got != want {
					t.Errorf("ran %d times through Execute, want %d", got, want)
				}
				if e, ok := ans.Noted(); !ok || e.WorkflowID != p.id {
					t.Errorf("the answer's entry %+v does not name workflow %s", e, p.id)
				}
				again := call.NewCall(call.Request{Tool: call.ContinueTool, Workflows: p.wfs})
				again.Cont = &workflow.Continuation{WorkflowID: p.id, Approved: true}
				if res := p.ap.AnswerCall(context.Background(), again); !res.IsError || p.ran() != want {
					t.Errorf("a second answer was applied: %+v", res)
				}
				if e, _ := again.Noted(); e.Decision == audit.Approved {
					t.Errorf("a second answer noted %+v", e)
				}
			})
		}
	}
}

// pausedRun is a code run paused on an inner call that asks.
func pausedRun(t *testing.T) pending {
	q := &requests{answer: pausing("filesystem:write_file")}
	r, _, wfs, ctx := newRuns(t, q, func(r *runner) {
		r.done(textOf(r.call(1, "filesystem:write_file", map[string]any{"path": "b"})))
	})
	a, ok := r.Start(ctx, callIn(ctx), "pml:execute", execute.Program{Code: "…"}).Approval()
	if !ok {
		t.Fatal("the run did not pause")
	}
	// The answer runs the inner call in the answering goroutine.
	var ran []string
	return pending{ap: approver(&ran), wfs: wfs, id: a.WorkflowID, ran: func() int { return len(ran) }}
}

// networkApproval is a call of the server probe whose egress proxy
// refused a host while it ran.
func networkApproval(t *testing.T) pending {
	ws := t.TempDir()
	log := zerolog.Nop()
	egress := sbx.NewEgressSet(nil, log, fmt.Sprintf("%d:%d", os.Getuid(), os.Getgid()))
	t.Cleanup(func() { egress.Close(context.Background()) })
	ep, err := egress.Get("probe", "server probe", "mcps.probe.network.allow", netallow.Rules{})
	if err != nil {
		t.Fatal(err)
	}
	exec := &refusingExec{ep: ep}
	probe := probeServers{}
	ap := &approve.Approver{Config: &config.Config{Path: filepath.Join(ws, ".pml.json")}, Workspace: ws, Egress: egress,
		Perms: permit.NewLivePermissions(permit.Permissions{}, "test"), TrustState: &permit.TrustState{}, Deps: deps.NewStore(ws), Log: &log,
		Sandbox: probe, Servers: probe}
	ap.Execute = approve.Network{Next: exec, Ask: ap}
	wfs := workflow.NewWorkflows(time.Minute)
	c := call.NewCall(call.Request{Tool: "probe:fetch", Workflows: wfs})
	c.Args = map[string]any{}
	a, ok := ap.Execute.Call(context.Background(), c).Approval()
	if !ok || a.ApprovalType != approve.ApprovalNetwork {
		t.Fatal("no network approval")
	}
	return pending{ap: ap, wfs: wfs, id: a.WorkflowID, ran: func() int { return exec.runs() - 1 }}
}

// refusingExec is an execute step whose tool's proxy refuses a host the
// first time it runs.
type refusingExec struct {
	mu sync.Mutex
	n  int
	ep *sbx.EgressProxy
}

func (e *refusingExec) Call(_ context.Context, c *call.Call) call.Result {
	e.mu.Lock()
	e.n++
	if e.n == 1 {
		e.ep.NoteRefused("evil.example", 443)
	}
	e.mu.Unlock()
	c.Note(audit.Entry{Tool: c.Tool, Decision: audit.Allowed})
	return call.Result{Text: "fetched"}
}

func (e *refusingExec) runs() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.n
}

// probeServers is the one server probe, and a sandbox that enforces every
// limit.
type probeServers struct{}

func (probeServers) ServerOf(tool string) (config.Server, bool) {
	if tool == "probe:fetch" {
		return config.Server{Name: "probe", Image: "probe"}, true
	}
	return config.Server{}, false
}
func (probeServers) LimitsNote(context.Context) string { return "" }
func (probeServers) OwnVariable(string) bool           { return false }

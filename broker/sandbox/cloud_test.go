package sandbox

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/pml-dev/pml/broker/call"
	"github.com/pml-dev/pml/internal/cloud"
	"github.com/pml-dev/pml/internal/execute"
	"github.com/pml-dev/pml/internal/toolbox"
)

// aCloud is a fake CloudTools: the permissions decide by decisions
// (allow when not named).
type aCloud struct {
	client    *cloud.Client
	keysErr   error
	decisions map[string]call.Decision
}

func (c aCloud) Client() *cloud.Client                  { return c.client }
func (c aCloud) Keys(string) (map[string]string, error) { return nil, c.keysErr }
func (c aCloud) PermissionSource() string               { return ".pml.json" }
func (c aCloud) Decide(tool string) (call.Decision, string) {
	if d, ok := c.decisions[tool]; ok {
		return d, tool
	}
	return call.Allow, ""
}

// aRunner is a fake Runner: it records what it was asked to start.
type aRunner struct {
	started []execute.Program
	upFront []*call.Declared
}

func (r *aRunner) Start(_ context.Context, c *call.Call, outer string, prog execute.Program) call.Result {
	r.started = append(r.started, prog)
	r.upFront = append(r.upFront, c.UpFrontFor(outer))
	return call.Result{Text: "ran"}
}

var planner = toolbox.Tool{Name: ExecuteTool}

func TestACloudCallNeedsTheKeyFirst(t *testing.T) {
	ex := NewCloudExec(aCloud{client: &cloud.Client{URL: "https://cloud.example"}}, &aRunner{})
	res := ex.Run(context.Background(), nil, toolbox.Tool{Name: "web:search"}, nil)
	if !errors.Is(res.Err(), call.ErrCloud) || !strings.Contains(res.Text, "Cloud mode requires PML_API_KEY: web:search runs in the PML cloud. Get a key at https://cloud.example/settings") {
		t.Errorf("text %q", res.Text)
	}
}

func TestACloudCallWhoseKeysMayNotGoSendsNothing(t *testing.T) {
	refused := errors.New("not granted; nothing was sent")
	ex := NewCloudExec(aCloud{client: &cloud.Client{APIKey: "k"}, keysErr: refused}, &aRunner{})
	if res := ex.Run(context.Background(), call.NewCall(call.Request{}), toolbox.Tool{Name: "web:search"}, nil); !errors.Is(res.Err(), refused) {
		t.Errorf("result %+v", res)
	}
}

func TestCodeThatDeclaresNothingRuns(t *testing.T) {
	runs := &aRunner{}
	ex := NewCloudExec(aCloud{}, runs)
	c := call.NewCall(call.Request{Tool: ExecuteTool})
	if res := ex.executeLocally(context.Background(), c, ExecuteTool, map[string]any{"code": "return 1"}); res.Text != "ran" {
		t.Fatalf("result %+v", res)
	}
	if len(runs.started) != 1 || runs.started[0].Code != "return 1" || runs.upFront[0] != nil {
		t.Errorf("started %+v with %v", runs.started, runs.upFront)
	}
}

func TestCodeWithoutCodeIsTheClouds(t *testing.T) {
	ex := NewCloudExec(aCloud{}, &aRunner{})
	res := ex.executeLocally(context.Background(), call.NewCall(call.Request{}), ExecuteTool, map[string]any{"code": " "})
	if !errors.Is(res.Err(), call.ErrCloud) || !strings.Contains(res.Text, "sent no code") {
		t.Errorf("text %q", res.Text)
	}
	res = ex.executeLocally(context.Background(), call.NewCall(call.Request{}), ExecuteTool, map[string]any{"code": "x", "tools_used": []any{"*"}})
	if !errors.Is(res.Err(), call.ErrCloud) || !strings.Contains(res.Text, "nothing ran") {
		t.Errorf("a pattern declared: %q", res.Text)
	}
}

func TestDeclaredToolsAreDecidedBeforeTheCodeRuns(t *testing.T) {
	payload := func() map[string]any {
		return map[string]any{"code": "x", "tools_used": []any{"fs:read", "fs:write"}}
	}
	t.Run("one denied refuses the run", func(t *testing.T) {
		runs := &aRunner{}
		ex := NewCloudExec(aCloud{decisions: map[string]call.Decision{"fs:write": call.Deny}}, runs)
		res := ex.executeLocally(context.Background(), call.NewCall(call.Request{}), ExecuteTool, payload())
		if !errors.Is(res.Err(), call.ErrDenied) || res.Refusal == nil || res.Refusal.Pattern != "fs:write" || len(runs.started) != 0 {
			t.Errorf("result %+v, started %d", res, len(runs.started))
		}
	})
	t.Run("those that ask wait for one approval", func(t *testing.T) {
		runs := &aRunner{}
		ex := NewCloudExec(aCloud{decisions: map[string]call.Decision{"fs:write": call.Ask}}, runs)
		p := payload()
		res := ex.executeLocally(context.Background(), call.NewCall(call.Request{}), ExecuteTool, p)
		d := res.UpFront
		if d == nil || len(d.Asked) != 1 || d.Asked[0] != "fs:write" || d.Held["code"] != "x" || len(runs.started) != 0 {
			t.Errorf("result %+v, started %d", res, len(runs.started))
		}
	})
	t.Run("all allowed: the run starts with them", func(t *testing.T) {
		runs := &aRunner{}
		ex := NewCloudExec(aCloud{}, runs)
		c := call.NewCall(call.Request{})
		ex.executeLocally(context.Background(), c, ExecuteTool, payload())
		if len(runs.upFront) != 1 || runs.upFront[0] == nil || len(runs.upFront[0].Tools) != 2 {
			t.Errorf("up front %+v", runs.upFront)
		}
	})
	t.Run("approved: the held code runs", func(t *testing.T) {
		runs := &aRunner{}
		ex := NewCloudExec(aCloud{client: &cloud.Client{APIKey: "k"}, decisions: map[string]call.Decision{"fs:write": call.Ask}}, runs)
		c := call.NewCall(call.Request{})
		c.UpFront = &call.Declared{Capability: ExecuteTool, Tools: []string{"fs:read", "fs:write"}, Asked: []string{"fs:write"}, WorkflowID: "wf1", Held: payload()}
		if res := ex.Run(context.Background(), c, planner, nil); res.Text != "ran" || len(runs.started) != 1 || runs.started[0].Code != "x" {
			t.Errorf("result %+v, started %+v", res, runs.started)
		}
	})
}

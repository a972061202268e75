package sandbox

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/pml-dev/pml/broker/call"
	"github.com/pml-dev/pml/internal/execute"
	"github.com/pml-dev/pml/internal/toolbox"
)

// someCode is a fake Capabilities holding one capability's code.
type someCode struct {
	tool     string
	declared []string
}

func (s someCode) Program(tool string, args map[string]any) (execute.Program, []string, bool) {
	if tool != s.tool {
		return execute.Program{}, nil, false
	}
	return execute.Program{Module: "export function double() {}", Export: "double", Args: args}, s.declared, true
}

func TestADenoCapabilityRunsItsExport(t *testing.T) {
	runs := &aRunner{}
	ex := NewDenoExec(someCode{tool: "mathx:double"}, runs)
	res := ex.Run(context.Background(), call.NewCall(call.Request{}), toolbox.Tool{Name: "mathx:double"}, map[string]any{"n": 2.0})
	if res.Text != "ran" || len(runs.started) != 1 || runs.started[0].Export != "double" || runs.started[0].Args["n"] != 2.0 {
		t.Errorf("result %+v, started %+v", res, runs.started)
	}
}

func TestADenoCapabilityNotLoadedIsNotFound(t *testing.T) {
	ex := NewDenoExec(someCode{tool: "mathx:double"}, &aRunner{})
	res := ex.Run(context.Background(), call.NewCall(call.Request{}), toolbox.Tool{Name: "other:f"}, nil)
	if !errors.Is(res.Err(), call.ErrNotFound) || !strings.Contains(res.Text, "its capability's code is not loaded") {
		t.Errorf("text %q", res.Text)
	}
}

func TestADeclaringCapabilityRunsOnlyOnceChecked(t *testing.T) {
	runs := &aRunner{}
	ex := NewDenoExec(someCode{tool: "mathx:double", declared: []string{"fs:read"}}, runs)
	c := call.NewCall(call.Request{})
	res := ex.Run(context.Background(), c, toolbox.Tool{Name: "mathx:double"}, nil)
	if !errors.Is(res.Err(), call.ErrUnavailable) || !strings.Contains(res.Text, "call it again") || len(runs.started) != 0 {
		t.Errorf("unchecked: %+v", res)
	}
	// Another capability's declaration is not this one's.
	c.UpFront = &call.Declared{Capability: "other:f", Tools: []string{"fs:read"}}
	if res := ex.Run(context.Background(), c, toolbox.Tool{Name: "mathx:double"}, nil); !res.IsError {
		t.Error("ran with another capability's declaration")
	}
	c.UpFront = &call.Declared{Capability: "mathx:double", Tools: []string{"fs:read"}}
	if res := ex.Run(context.Background(), c, toolbox.Tool{Name: "mathx:double"}, nil); res.Text != "ran" || runs.upFront[0] != c.UpFront {
		t.Errorf("checked: %+v", res)
	}
}

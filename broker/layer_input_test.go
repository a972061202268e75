package broker

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/pml-dev/pml/broker/call"
)

func TestInputLayerSendsAnswersAsideAndStripsTheContinuation(t *testing.T) {
	cases := []struct {
		name, tool, args string
		elicited         bool
		toNext, toAnswer int
		isError          bool
	}{
		{"a plain call", "t", `{"a": 1}`, false, 1, 0, false},
		{"no arguments", "t", ``, false, 1, 0, false},
		{"null arguments", "t", `null`, false, 1, 0, false},
		{"arguments not an object", "t", `"x"`, false, 0, 0, true},
		{"continue_workflow", "t", `{"a": 1, "continue_workflow": {"workflow_id": "w", "approved": true}}`, false, 0, 1, false},
		{"malformed continue_workflow", "t", `{"continue_workflow": {"approved": true}}`, false, 0, 0, true},
		{"pml:continue_workflow", call.ContinueTool, `{"workflow_id": "w", "approved": false}`, false, 0, 1, false},
		{"an elicited answer", "t", ``, true, 0, 1, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			next, answers := &fakeNext{}, &fakeNext{}
			req := call.Request{Tool: tc.tool, Args: json.RawMessage(tc.args)}
			if tc.elicited {
				req.Elicited = &call.Elicited{WorkflowID: "w", Choice: "continue"}
			}
			c := call.NewCall(req)
			res := inputLayer{next: next, answers: answers}.Call(context.Background(), c)
			if next.reached != tc.toNext || answers.reached != tc.toAnswer || res.IsError != tc.isError {
				t.Fatalf("next %d, answers %d, isError %v (%s)", next.reached, answers.reached, res.IsError, res.Text)
			}
			if _, ok := c.Args["continue_workflow"]; ok {
				t.Error("continue_workflow left in the tool's arguments")
			}
			if answers.reached == 1 && !tc.elicited && (answers.got.Cont == nil || answers.got.Cont.WorkflowID != "w") {
				t.Errorf("the answer is not on the call: %+v", answers.got.Cont)
			}
			if _, noted := c.Noted(); noted != tc.isError {
				t.Errorf("noted=%v for isError=%v", noted, tc.isError)
			}
		})
	}
}

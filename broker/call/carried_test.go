package call

import (
	"encoding/json"
	"testing"
)

// What travels with a call is on the Call and its Request (issue 52):
// these are the rules a context value used to give.

func TestAnUpFrontDeclarationIsOnlyItsCapabilitys(t *testing.T) {
	var none *Call
	if none.UpFrontFor("cap:f") != nil {
		t.Error("a nil call has a declaration")
	}
	c := NewCall(Request{Tool: "cap:f"})
	if c.UpFrontFor("cap:f") != nil {
		t.Error("a new call has a declaration")
	}
	d := &Declared{Capability: "cap:f", Tools: []string{"fs:read"}}
	c.UpFront = d
	if c.UpFrontFor("cap:f") != d {
		t.Error("the capability's own declaration is not found")
	}
	// A run started by an inner call never takes its parent's.
	if c.UpFrontFor("other:g") != nil {
		t.Error("another tool took the declaration")
	}
}

func TestACallReenteredWithinAnotherCarriesItsData(t *testing.T) {
	run := &Declared{Capability: "cap:f"}
	fwd := NewForwardCall(json.RawMessage(`{}`), nil, nil, nil)
	outer := Request{Tool: "a:b", ProgressToken: "tok", Forward: fwd, Run: run, Meta: map[string]any{"k": "v"}}
	again := Request{Tool: "x:y", Args: json.RawMessage(`{"k":1}`)}.Within(outer)
	if again.Tool != "x:y" || string(again.Args) != `{"k":1}` {
		t.Errorf("its own fields changed: %+v", again)
	}
	if again.ProgressToken != "tok" || again.Forward != fwd || again.Run != run || again.Meta["k"] != "v" {
		t.Errorf("the outer call's data is lost: %+v", again)
	}
}

func TestAForwardIsOnUntilALayerTurnsItOff(t *testing.T) {
	var none *ForwardCall
	if none.On() || none.Answered() {
		t.Error("no forward is on or answered")
	}
	none.Off() // a call without a forward: nothing to turn off
	progressed := false
	f := NewForwardCall(json.RawMessage(`{"a":1}`), json.RawMessage(`7`), func([]byte) { progressed = true }, func(json.RawMessage) bool { return true })
	if !f.On() || f.Answered() {
		t.Fatal("a new forward is off or answered")
	}
	args, token, progress, answer := f.Parts()
	progress(nil)
	if string(args) != `{"a":1}` || string(token) != "7" || !progressed || !answer(nil) {
		t.Errorf("parts %s %s", args, token)
	}
	f.SetAnswered(true)
	if !f.Answered() {
		t.Error("not answered")
	}
	f.Off()
	if f.On() {
		t.Error("still on")
	}
}

package approve

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/pml-dev/pml/broker/call"
	"github.com/pml-dev/pml/broker/workflow"
	"github.com/pml-dev/pml/internal/audit"
	"github.com/pml-dev/pml/internal/config"
	"github.com/pml-dev/pml/internal/netallow"
)

// probeServer configures the server probe, whose container goes out
// through the egress proxy "probe"; the execute step refuses host the
// first time it runs, as the proxy does for a host the rules do not name.
func probeServer(t *testing.T, f *fakes, host string) {
	t.Helper()
	f.parts.servers["probe"] = config.Server{Name: "probe", Image: "probe"}
	ep, err := f.ap.Egress.Get("probe", "server probe", "mcps.probe.network.allow", netallow.Rules{})
	if err != nil {
		t.Fatal(err)
	}
	first := true
	f.exec.during = func(*Call) {
		if first {
			first = false
			ep.NoteRefused(host, 443)
		}
	}
}

func TestNothingRefusedIsTheToolsOwnResult(t *testing.T) {
	f := newFakes(t)
	probeServer(t, f, "")
	f.exec.during = nil
	wfs := workflow.NewWorkflows(time.Minute)
	c := layerCall(wfs, "probe:fetch", call.Allow)
	if res := f.ap.Execute.Call(context.Background(), c); res.Text != "ran" || wfs.Len() != 0 {
		t.Fatalf("%+v", res)
	}
	if e, _ := c.Noted(); e.Decision != audit.Allowed {
		t.Errorf("entry %+v", e)
	}
}

func TestARefusedHostBecomesANetworkApprovalAndAnApprovedOneRunsAgain(t *testing.T) {
	f := newFakes(t)
	probeServer(t, f, "evil.example")
	wfs := workflow.NewWorkflows(time.Minute)
	c := layerCall(wfs, "probe:fetch", call.Allow)
	res := f.ap.Execute.Call(context.Background(), c)
	a, ok := res.Approval()
	if !ok || a.ApprovalType != ApprovalNetwork || !strings.Contains(a.Description, "evil.example:443") || !strings.Contains(a.Description, "server probe") {
		t.Fatalf("no network approval naming the host and the server: %+v", res)
	}
	if a.Context["result"] != "ran" || a.Context["config_key"] != "mcps.probe.network.allow" {
		t.Errorf("context %v", a.Context)
	}
	if e, _ := c.Noted(); e.Decision != audit.Asked || e.Reason != "network: evil.example:443" {
		t.Errorf("entry %+v", e)
	}
	ans := answering(wfs, a.WorkflowID, true, false)
	if res := f.ap.AnswerCall(context.Background(), ans); res.Text != "ran" {
		t.Fatalf("approved: %+v", res)
	}
	// Ran twice, the second time through the handler approve was given,
	// with the host allowed for the session.
	if runs := f.exec.runs(); len(runs) != 2 || runs[1] != (ran{"probe:fetch", c.Pattern}) {
		t.Errorf("ran %v", runs)
	}
	if ep := f.ap.Egress.Lookup("probe"); !allows(ep.Current(), "evil.example", 443) {
		t.Error("the host was not allowed for the session")
	}
	if e, _ := ans.Noted(); e.Decision != audit.Approved || e.WorkflowID != a.WorkflowID {
		t.Errorf("entry %+v", e)
	}
}

func TestARejectedNetworkApprovalSaysTheCallRanOnce(t *testing.T) {
	f := newFakes(t)
	probeServer(t, f, "evil.example")
	wfs := workflow.NewWorkflows(time.Minute)
	c := inDialog(wfs, "probe:fetch", "abort")
	c.Args, c.Pattern = map[string]any{}, "probe:*"
	res := f.ap.Execute.Call(context.Background(), c)
	if !res.IsError || !strings.Contains(res.Text, "ran once, up to its refused connection to evil.example:443") || !strings.Contains(res.Text, "This is final") {
		t.Fatalf("%+v", res)
	}
	if len(f.exec.runs()) != 1 {
		t.Errorf("ran %v: a no must not run it again", f.exec.runs())
	}
}

func TestNetworkAlwaysAddsTheHostToTheServersAllowList(t *testing.T) {
	f := newFakes(t)
	probeServer(t, f, "evil.example")
	if err := os.WriteFile(f.ap.Config.Path, []byte(`{"mcps": {"probe": {"image": "probe"}}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	wfs := workflow.NewWorkflows(time.Minute)
	a, _ := f.ap.Execute.Call(context.Background(), layerCall(wfs, "probe:fetch", call.Allow)).Approval()
	if !slices.Contains(a.Options, "always") {
		t.Fatalf("always not offered: %+v", a)
	}
	ans := answering(wfs, a.WorkflowID, true, true)
	if res := f.ap.AnswerCall(context.Background(), ans); res.Text != "ran" {
		t.Fatalf("%+v", res)
	}
	raw, _ := os.ReadFile(f.ap.Config.Path)
	if !strings.Contains(string(raw), "evil.example:443") {
		t.Errorf(".pml.json: %s", raw)
	}
	if e, _ := ans.Noted(); e.Decision != audit.Always {
		t.Errorf("entry %+v", e)
	}
}

func TestARunAgainThatMeetsAnotherRefusalAsksAgain(t *testing.T) {
	f := newFakes(t)
	probeServer(t, f, "one.example")
	ep := f.ap.Egress.Lookup("probe")
	n := 0
	f.exec.during = func(*Call) {
		n++
		if n <= 2 {
			ep.NoteRefused([]string{"one.example", "two.example"}[n-1], 443)
		}
	}
	wfs := workflow.NewWorkflows(time.Minute)
	a, _ := f.ap.Execute.Call(context.Background(), layerCall(wfs, "probe:fetch", call.Allow)).Approval()
	again, ok := f.ap.AnswerCall(context.Background(), answering(wfs, a.WorkflowID, true, false)).Approval()
	if !ok || again.ApprovalType != ApprovalNetwork || !strings.Contains(again.Description, "two.example:443") || again.WorkflowID == a.WorkflowID {
		t.Fatalf("the second refusal was not asked: %+v", again)
	}
}

func allows(r netallow.Rules, host string, port int) bool {
	_, ok := r.Find(host, port)
	return ok
}

package mcpserve

import (
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/pml-dev/pml/broker/workflow"
	"github.com/pml-dev/pml/internal/vouch"
)

func privateState(t *testing.T) {
	t.Helper()
	dir := t.TempDir()
	vouch.Getenv = func(k string) string {
		if k == "XDG_STATE_HOME" {
			return dir
		}
		return ""
	}
	t.Cleanup(func() { vouch.Getenv = os.Getenv })
}

// A sealed state opens only in its workspace, before it expires, and is
// answered once.
func TestARequestStateOpensOnlyWhereAndWhileItWasSealed(t *testing.T) {
	privateState(t)
	now := time.Now()
	a := workflow.Approval{WorkflowID: "wf-1", ApprovalType: workflow.ApprovalToolPermission, ExpiresAt: now.Add(time.Minute)}
	rs, err := sealState("/ws/a", "srv:tool", json.RawMessage(`{"x":1}`), a, time.Minute)
	if err != nil || !strings.HasPrefix(rs, statePrefix) {
		t.Fatalf("%q %v", rs, err)
	}
	st, err := openState("/ws/a", rs, now)
	if err != nil || st.Tool != "srv:tool" || string(st.Args) != `{"x":1}` || st.Workflow != "wf-1" {
		t.Fatalf("%+v %v", st, err)
	}
	if _, err := openState("/ws/b", rs, now); !errors.Is(err, errForged) {
		t.Errorf("another workspace opened it: %v", err)
	}
	if _, err := openState("/ws/a", rs, now.Add(2*time.Minute)); err == nil || !strings.Contains(err.Error(), "expired") {
		t.Errorf("an expired state: %v", err)
	}
	if err := markAnswered(st, now); err != nil {
		t.Fatal(err)
	}
	if err := markAnswered(st, now); !errors.Is(err, errReplayed) {
		t.Errorf("a second answer: %v", err)
	}
	// An approval without an expiry lasts the ttl.
	a.ExpiresAt = time.Time{}
	rs, _ = sealState("/ws/a", "srv:tool", nil, a, time.Minute)
	if _, err := openState("/ws/a", rs, now); err != nil {
		t.Errorf("an approval without expiry: %v", err)
	}
}

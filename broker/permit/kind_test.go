package permit

import (
	"testing"

	"github.com/pml-dev/pml/broker/call"
)

// The permission names of a server's prompts and resources
// (call.PromptPermission, call.ResourcePermission) are decided by the
// same lists as its tools: "memory:*" covers them (a glob's * matches
// ':'), "memory:prompt:*" covers only prompts, a tool pattern none
// (issue 53).
func TestPromptAndResourcePermissionsAreDecidedByTheLists(t *testing.T) {
	p := Permissions{
		Allow: []string{"memory:*", "everything:prompt:*"},
		Deny:  []string{"everything:resource:file:///secret/*", "everything:read_*"},
	}
	for name, want := range map[string]call.Decision{
		call.PromptPermission("memory", "greet"):                  call.Allow,
		call.ResourcePermission("memory", "memory://graph"):       call.Allow,
		call.PromptPermission("everything", "greet (with Icons)"): call.Allow,
		call.ResourcePermission("everything", "file:///secret/a"): call.Deny,
		call.ResourcePermission("everything", "embedded:info"):    call.Ask,
		call.ResourcePermission("everything", "read_file"):        call.Ask,
		call.PromptPermission("other", "greet"):                   call.Ask,
	} {
		if got, pat := p.Decide(name); got != want {
			t.Errorf("%s: %s (by %q), want %s", name, got, pat, want)
		}
	}
	if s, k, rest, ok := call.FeatureName("everything:resource:http://x/~{a}/"); !ok || s != "everything" || k != "resource" || rest != "http://x/~{a}/" {
		t.Errorf("FeatureName: %q %q %q %v", s, k, rest, ok)
	}
	if _, _, _, ok := call.FeatureName("everything:greet"); ok {
		t.Error("a tool's name read as a prompt's or resource's")
	}
}

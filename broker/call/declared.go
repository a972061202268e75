package call

import "github.com/pml-dev/pml/internal/toolglob"

// Declared is what a capability declares its code calls (its registry
// entry's tools_used and client_tools) and, of those, the ones the
// permissions ask about: all put to the person in one approval before
// the run starts (seed 000 story 14.3 AC4-6). Once the run started, the
// calls it declared and the person approved do not ask again; a call it
// did not declare is decided on its own and flagged in the audit. A
// Declared is not changed once made: safe for concurrent use.
type Declared struct {
	// Capability is the tool whose run this is (mathx:double).
	Capability string
	// Tools are the declared tools; Asked those of them the permissions
	// ask about.
	Tools, Asked []string
	// Servers are the servers the capability requires (its mcp_deps),
	// none of them denied whole when the run was checked.
	Servers []string
	// WorkflowID is the approval that let the run start with Asked
	// approved ("" when nothing was asked).
	WorkflowID string
	// Held is the cloud's execute_locally answer whose run waits for
	// this approval (pml:execute, whose code is known only once the cloud
	// answered): approved, the run starts from it, and the cloud is not
	// asked again for other code. nil for a capability's run.
	Held map[string]any
}

// Declares reports whether d names tool (in any of the forms a
// permission pattern may name it: toolglob.Exact).
func (d *Declared) Declares(tool string) bool {
	return d != nil && named(d.Tools, tool)
}

// ApprovedUpFront reports whether tool was asked about and approved
// before the run started: its call does not ask again.
func (d *Declared) ApprovedUpFront(tool string) bool {
	return d != nil && d.WorkflowID != "" && named(d.Asked, tool)
}

// Approved is d once the person approved it in workflow id.
func (d *Declared) Approved(id string) *Declared {
	out := *d
	out.WorkflowID = id
	return &out
}

func named(list []string, tool string) bool {
	for _, t := range list {
		if toolglob.Exact(t, tool) {
			return true
		}
	}
	return false
}

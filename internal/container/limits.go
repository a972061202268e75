package container

import (
	"fmt"
	"strings"
)

// LimitsNote says which of the policy's resource limits the engine does
// not enforce, and why, in the words pml uses wherever it states a call's
// policy (doctor, approvals, the audit log); "" when it enforces them all.
func (i Info) LimitsNote() string {
	if len(i.Unenforced) == 0 {
		return ""
	}
	engine := i.Engine
	if engine == "" {
		engine = "this engine"
	}
	on := ""
	if i.CgroupVersion != "" {
		on = " on cgroup v" + i.CgroupVersion
	}
	return fmt.Sprintf("not enforced: %s%s ignores the %s limits", engine, on, strings.Join(i.Unenforced, ", "))
}

package approve

import (
	"os"
	"slices"

	"github.com/pml-dev/pml/broker/permit"
	"github.com/pml-dev/pml/internal/config"
	"github.com/pml-dev/pml/internal/toolglob"
)

// AllowAlways persists tool in permissions.allow and applies it at once,
// as an exact pattern: the glob characters of its name escaped
// (toolglob.Escape), so "always" for a tool named evil:* allows that one
// tool, not every tool of evil.
// Without a .pml.json, the file is first created with the built-in
// defaults, so saving one answer does not take the defaults away.
func (ap *Approver) AllowAlways(tool string) error {
	return ap.Perms.Change(func(p *Permissions) error {
		inAsk := permit.Contains(p.Ask, tool)
		err := ap.writeConfig(func(old []byte) ([]byte, error) {
			if old == nil {
				old = config.WithPermissions(p.Allow, p.Ask, p.Deny)
			}
			// An exact name in ask beats allow (permissions.go): it leaves
			// ask, or the next call would ask again.
			save := config.AddAllowData
			if inAsk {
				save = config.MoveToAllowData
			}
			out, err := save(ap.Config.Path, old, tool)
			if out == nil && err == nil {
				out = old // nothing to change
			}
			return out, err
		})
		if err != nil {
			return err
		}
		// The escaped name the file now holds (config.AddAllowData):
		// exactly this tool, even when its name holds a glob character.
		p.Allow = append(append([]string(nil), p.Allow...), toolglob.Escape(tool))
		if inAsk {
			// Every exact name of the tool leaves, in whatever form it
			// was written ("SHELL:EXEC", "shell__exec"): any of them
			// would outrank the allow (config.MoveToAllowData does the
			// same in the file).
			p.Ask = slices.DeleteFunc(slices.Clone(p.Ask), func(s string) bool { return toolglob.Exact(s, tool) })
		}
		return nil
	})
}

// alwaysBlocked says why "always" cannot keep its promise for tool, or ""
// when it can. Answering "always" writes .pml.json; permissions that come
// from pml's environment (PML_PERMISSIONS_*) replace the file's, so the
// answer would not hold there: then "always" is neither offered nor
// accepted.
func (ap *Approver) alwaysBlocked(tool string) string {
	if os.Getenv("PML_PERMISSIONS_ALLOW") != "" {
		return "permissions.allow comes from PML_PERMISSIONS_ALLOW in pml's environment, which replaces the file's list, so a name saved in .pml.json would not be used"
	}
	if ap.Perms.InAsk(tool) && os.Getenv("PML_PERMISSIONS_ASK") != "" {
		return tool + " is named in PML_PERMISSIONS_ASK in pml's environment, which pml does not edit, and a name in ask beats allow"
	}
	return ""
}

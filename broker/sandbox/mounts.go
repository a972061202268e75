package sandbox

import "github.com/pml-dev/pml/internal/toolbox"

// protectedPaths are pml's own files in the workspace. A container that
// may write the workspace (shell:exec, a write tool, an "rw" server) sees
// them read-only: otherwise a command allowed once could rewrite
// .pml.json to allow itself everything (or run as root) in the next
// session, or forge the lockfile that guards registry code.
var protectedPaths = toolbox.Protected

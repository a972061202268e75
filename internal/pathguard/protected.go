package pathguard

import (
	"path/filepath"
	"strings"
)

// ProtectedNames are pml's own configuration and state at the workspace
// root, the MCP client's configuration that starts pml, and the secrets
// file pml reads: they decide what later calls and sessions may do, so no
// tool may change them.
var ProtectedNames = []string{".pml.json", ".pml.local.json", ".pml", ".mcp.json", ".env"}

// Protected reports which protected name p (absolute and clean, inside ws)
// is or lies under. The comparison ignores case (and the trailing dots and
// spaces Windows drops): on a case-insensitive filesystem, as macOS and
// Windows hosts share the workspace with Docker, `.PML.JSON` is the same
// file as `.pml.json`, and writing it through that name passes by the
// read-only mount of the real name.
func Protected(ws, p string) (string, bool) {
	rel, err := filepath.Rel(ws, p)
	if err != nil || rel == "." || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return "", false
	}
	first, _, _ := strings.Cut(rel, string(filepath.Separator))
	return ProtectedName(first)
}

// ProtectedName reports whether one name at the workspace root is a
// protected one, ignoring case; it returns the protected spelling.
func ProtectedName(name string) (string, bool) {
	trimmed := strings.TrimRight(name, ". ")
	for _, n := range ProtectedNames {
		if strings.EqualFold(name, n) || strings.EqualFold(trimmed, n) {
			return n, true
		}
	}
	return "", false
}

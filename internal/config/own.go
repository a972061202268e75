package config

import "strings"

// OwnVariable reports whether name is one of pml's own settings and
// secrets (PML_*, PML_API_KEY above all): never handed to a server, never
// sent as a tool's key, never granted to a registry entry, whatever a
// configuration or an entry asks for.
func OwnVariable(name string) bool { return strings.HasPrefix(strings.ToUpper(name), "PML_") }

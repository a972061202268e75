package doctor

import (
	"fmt"
	"sort"
	"strings"

	"github.com/pml-dev/pml/internal/config"
	"github.com/pml-dev/pml/internal/extramount"
)

// checkExtraMounts lists the extra mounts (sandbox.mounts, per project and per
// server) in force after trust, so a person sees what beyond the
// workspace a tool container gets. Refused ones never load (the config
// check fails); untrusted ones are held back by trust. Each is resolved
// as a container would get it now (internal/extramount): one that is
// gone, or now leads somewhere refused, fails the calls that get it.
func checkExtraMounts(cfg *config.Config, ws string) (Check, bool) {
	var parts []string
	for _, m := range cfg.Sandbox.Mounts {
		parts = append(parts, m.String())
	}
	var names []string
	for n := range cfg.Servers {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		for _, m := range cfg.Servers[n].Mounts {
			parts = append(parts, m.String()+" for "+n)
		}
	}
	if len(parts) == 0 {
		return Check{}, false
	}
	set := extramount.New(ws, cfg.Sandbox.Mounts, nil)
	set.Servers(cfg.Servers)
	_, err := set.Tool(false)
	for _, n := range names {
		if err != nil {
			break
		}
		_, err = set.Server(cfg.Servers[n])
	}
	if err != nil {
		return Check{"fail", "extra mounts", err.Error(), "do as it says: until then every call whose container gets this mount fails, before anything runs"}, true
	}
	return Check{"ok", "extra mounts", fmt.Sprintf("beyond the workspace (sandbox.mounts): %s; mounted into the filesystem tools', shell:exec's and the servers' containers (a server's own into its containers only)", strings.Join(parts, ", ")), ""}, true
}

package broker

import (
	"path/filepath"
	"sort"

	sbx "github.com/pml-dev/pml/broker/sandbox"
	"github.com/pml-dev/pml/internal/config"
	"github.com/pml-dev/pml/internal/toolbox"
)

// KnownTools are the tool names pml can name without starting anything
// (pml doctor checks the permission patterns against them).
type KnownTools struct {
	// Names are pml's names (namespace:action) of the built-in tools, of
	// the configured servers' tools in the tools cache, and of the cloud's
	// tools in its cache.
	Names []string
	// Unlisted are the configured servers whose tools are not cached yet
	// (never started here): a pattern may name their tools.
	Unlisted []string
}

// Known lists the tools of workspace with configuration cfg as far as pml
// knows them without starting a server or contacting the cloud: the
// built-in ones, each configured server's from the tools cache (whatever
// its configuration was when it was cached: doctor only wants names), and
// the cloud's cached list.
func Known(workspace string, cfg *config.Config) KnownTools {
	var k KnownTools
	for _, t := range toolbox.Filesystem {
		k.Names = append(k.Names, t.Name)
	}
	k.Names = append(k.Names, sbx.ShellTool.Name, ContinueTool, ExecuteTool)
	var servers map[string]config.Server
	if cfg != nil {
		servers = cfg.Servers
	}
	cached := (&toolsCache{Path: filepath.Join(workspace, ".pml", "tools-cache.json")}).Read()
	for name := range servers {
		e, ok := cached[name]
		if !ok || len(e.Tools) == 0 {
			k.Unlisted = append(k.Unlisted, name)
			continue
		}
		for _, t := range e.Tools {
			if t != nil {
				k.Names = append(k.Names, name+":"+t.Name)
			}
		}
	}
	if tools, err := readCloudTools(workspace, filepath.Join(workspace, cloudToolsFile)); err == nil {
		for _, t := range tools {
			if t != nil {
				k.Names = append(k.Names, t.Name)
			}
		}
	}
	sort.Strings(k.Unlisted)
	return k
}

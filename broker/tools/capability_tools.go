package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/google/jsonschema-go/jsonschema"

	"github.com/pml-dev/pml/internal/capname"
	"github.com/pml-dev/pml/internal/mcpname"
	"github.com/pml-dev/pml/internal/panics"
	"github.com/pml-dev/pml/internal/registry"
	"github.com/pml-dev/pml/internal/routing"
	"github.com/pml-dev/pml/internal/termsafe"
	"github.com/pml-dev/pml/internal/toolbox"
)

// Capabilities as tools of pml stdio (issue 43, the seeds' "unified
// gateway"): every deno capability recorded in .pml/capabilities.json
// (pml add) is listed as namespace:function next to the servers' tools,
// and a call runs its code in a Deno container as pml:execute does, its
// mcp.* calls going down the whole request path.
//
// They load from what pml add stored, never from the network: the cached
// copy of the entry (whose content the cache checks against its
// integrity) must be the version the lockfile records. So neither
// initialize nor tools/list waits for a registry, and a session works
// offline. A copy missing or changed leaves the capability unlisted, with
// a log line saying to run pml add again (which fetches and asks).

// addedTools is what the session lists of the added capabilities.
type addedTools struct {
	mu sync.Mutex
	// listed maps a capability's name to its FQDN and the tools listed
	// for it.
	listed map[string]listedCapability
	// stamp is the capabilities file as last read (watchAdded).
	stamp fileStamp
	// named is what is known of the capabilities .pml.json names.
	named namedState
	// said are the lines already logged about records of the file that
	// are not listed (CheckedCapabilities): each once per process.
	said map[string]bool
}

type listedCapability struct {
	fqdn, namespace string
	tools           []string
}

type fileStamp struct {
	mod  time.Time
	size int64
	ok   bool
}

func (s fileStamp) same(o fileStamp) bool {
	return s.ok == o.ok && s.size == o.size && s.mod.Equal(o.mod)
}

func stampOf(path string) fileStamp {
	fi, err := os.Stat(path)
	if err != nil {
		return fileStamp{}
	}
	return fileStamp{mod: fi.ModTime(), size: fi.Size(), ok: true}
}

// LoadAdded lists the deno and cloud capabilities of
// .pml/capabilities.json and those .pml.json names (capability_named.go)
// as tools, and unlists those no longer there (or at another version): the
// tool table tells the sessions (tools/list_changed).
func (cs *Capabilities) LoadAdded() {
	a := &cs.added
	a.mu.Lock()
	defer a.mu.Unlock()
	path := filepath.Join(cs.ws, CapabilitiesFile)
	a.stamp = stampOf(path)
	caps, notes, err := CheckedCapabilities(cs.ws)
	if err != nil {
		cs.log.Warn().Err(err).Msg("the added capabilities are not listed")
		return
	}
	for _, n := range notes {
		if !a.said[n] {
			if a.said == nil {
				a.said = map[string]bool{}
			}
			a.said[n] = true
			cs.log.Warn().Msg(n)
		}
	}
	if a.listed == nil {
		a.listed = map[string]listedCapability{}
	}
	// Read from disk, not the session's copy: a pml add run during the
	// session wrote it, and so did a named capability's fetch.
	var lock *registry.Lockfile
	readLock := func() bool {
		if lock == nil {
			if lock, err = registry.LoadLockfileKeeping(registry.LockfilePath(cs.ws), func(string) bool { return true }); err != nil {
				cs.log.Warn().Err(err).Msg("the added capabilities are not listed")
				return false
			}
		}
		return true
	}
	named := map[string]bool{}
	a.named.missing = nil
	if refs := cs.namedRefs(); len(refs) > 0 {
		if !readLock() {
			return
		}
		var more map[string]Capability
		more, a.named.missing = namedCapabilities(refs, caps, lock)
		for n, c := range more {
			caps[n], named[n] = c, true
		}
	}
	// A namespace taken by a built-in group, a configured server, the
	// cloud or another capability (capability_namespace.go) is not
	// listed; one listed before (a server configured since) leaves.
	taken := map[string]error{}
	for n, c := range caps {
		if c.Type != registry.TypeDeno && c.Type != registry.TypeHTTP {
			continue
		}
		if err := cs.namespaceTaken(n, c.Namespace, c.FQDN, caps); err != nil {
			taken[n] = err
		}
	}
	for _, name := range sortedKeys(a.listed) {
		l := a.listed[name]
		if c, ok := caps[name]; ok && c.FQDN == l.fqdn && taken[name] == nil {
			continue
		}
		cs.servers.ReplaceTools(l.tools, nil, cs.exec.Deno())
		delete(a.listed, name)
		cs.registry.dropDeno(l.namespace)
		if taken[name] != nil {
			continue // said below
		}
		cs.log.Info().Str("capability", name).Msg("a capability was removed (pml remove, or out of .pml.json's capabilities); its tools are no longer listed")
	}
	for _, c := range SortedCapabilities(caps) {
		if _, ok := a.listed[c.Name]; ok || c.Type != registry.TypeDeno && c.Type != registry.TypeHTTP {
			continue
		}
		if err := taken[c.Name]; err != nil {
			cs.log.Warn().Str("capability", c.Name).Msg("the capability is not listed: " + err.Error())
			continue
		}
		if !readLock() {
			return
		}
		e, err := cs.lockedCopy(c, lock)
		if err != nil && named[c.Name] {
			// Pinned, but this clone's cache has no good copy: fetched
			// again (and checked against the pin) in the background.
			if ref, perr := capname.Parse(c.Name); perr == nil {
				a.named.missing = append(a.named.missing, ref)
			}
			continue
		}
		if err != nil {
			cs.log.Warn().Err(err).Str("capability", c.Name).Msg("the capability is not listed")
			continue
		}
		list := cs.listDeno
		if c.Type == registry.TypeHTTP {
			list = cs.listCloud
		}
		a.listed[c.Name] = listedCapability{fqdn: c.FQDN, namespace: c.Namespace, tools: list(c, e)}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// lockedCopy is the cached copy of an added capability's entry, when it
// is the version lock records.
func (cs *Capabilities) lockedCopy(c Capability, lock *registry.Lockfile) (*registry.Entry, error) {
	again := "run `pml add " + c.Name + "` to fetch it again"
	if cs.registry.client == nil {
		return nil, fmt.Errorf("the registries cannot be used (%v); fix .pml.json", cs.registry.lockErr)
	}
	e, err := cs.registry.client.Cached(c.FQDN)
	if err != nil {
		return nil, fmt.Errorf("its cached copy of %s cannot be read (%v): %s", c.FQDN, err, again)
	}
	if e == nil {
		return nil, fmt.Errorf("the cache holds no copy of %s: %s", c.FQDN, again)
	}
	le, ok := lock.Get(c.FQDN)
	switch {
	case !ok:
		return nil, fmt.Errorf("%s does not record %s: %s", lock.Path(), c.FQDN, again)
	case le.FQDN != e.FQDN || le.Integrity != e.Integrity || le.CodeIntegrity != "" && le.CodeIntegrity != e.CodeIntegrity:
		return nil, fmt.Errorf("the cached copy of %s is not the version %s records: %s and review the change", c.FQDN, lock.Path(), again)
	}
	return e, nil
}

// listDeno makes each exported function of a deno capability's entry e a
// tool ns:function, described by the registry when it says something
// (the entry's metadata, else what pml add recorded), and returns their
// names. Its functions run here, whatever the cloud routes under that
// namespace.
func (cs *Capabilities) listDeno(c Capability, e *registry.Entry) []string {
	cs.registry.setDeno(c.Namespace, e)
	cs.cloud.AddLocal(c.Namespace)
	desc, schema := cs.described(c, e)
	var defs []toolbox.Tool
	for _, fn := range ExportedFunctions(e.Code, e.FQDN) {
		// A registry chooses these names as a server does its tools'
		// ("$x" is a JavaScript name, not an MCP one).
		if err := mcpname.Tool(fn); err != nil {
			cs.log.Warn().Str("capability", termsafe.Quote(c.Name, 0)).Str("tool", termsafe.Quote(fn, 0)).Msg("a function of the capability is not listed: " + err.Error())
			continue
		}
		// Named without the FQDN's hash: what the code is, pml add's lock
		// pins (the person's act); what a tool says is pinned apart
		// (toolpin), and a new hash alone must not hold every tool of a
		// capability the person just updated.
		d := fmt.Sprintf("%s (from %s): runs the capability's function %s with the arguments object.", fn, unhashed(e.FQDN), fn)
		if desc != "" {
			d = desc + " (" + d + ")"
		}
		defs = append(defs, toolbox.Tool{Name: c.Namespace + ":" + fn, Description: d, InputSchema: schema})
	}
	exec := cs.exec.Deno()
	if err := cs.depsMissing(c.Name, e); err != nil { // its mcp_deps (capability_deps.go)
		cs.log.Warn().Str("capability", c.Name).Msg(err.Error())
		exec = refusedExec{err}
	}
	return cs.servers.ReplaceTools(nil, defs, exec)
}

// described is the description and input schema the registry gives an
// added capability's tools (the entry's metadata, else what pml add
// recorded; any arguments object when its schema is not usable).
func (cs *Capabilities) described(c Capability, e *registry.Entry) (string, json.RawMessage) {
	desc, schema := c.Description, json.RawMessage(nil)
	if e.Meta != nil {
		if e.Meta.Description != "" {
			desc = e.Meta.Description
		}
		schema = e.Meta.InputSchema
	}
	if len(schema) > 0 {
		if err := objectSchema(schema); err != nil {
			cs.log.Warn().Err(err).Str("capability", c.Name).Msg("the registry's input schema is not used; the tools take any arguments object")
			schema = nil
		}
	}
	if len(schema) == 0 {
		schema = json.RawMessage(`{"type":"object"}`)
	}
	return desc, schema
}

// listCloud lists the tools an added cloud entry declares (type http,
// the seeds' "type": "cloud"): the registry says they run in the PML
// cloud, so they are routed there with the keys the entry requires,
// whatever the routing table says of the namespace, and listed even when
// the cloud's own list does not name them. Offline they stay listed, and
// a call answers that the cloud cannot be reached.
func (cs *Capabilities) listCloud(c Capability, e *registry.Entry) []string {
	if e.Meta == nil {
		return nil
	}
	if !cs.cloud.Client.Enabled() {
		// Local mode lists no cloud tool (pml add said to set the key).
		cs.log.Info().Str("capability", c.Name).Msg("not listed: it runs in the PML cloud, and local mode (no PML_API_KEY) does not use the cloud")
		return nil
	}
	cs.cloud.router.AddServer(c.Namespace)
	desc, schema := cs.described(c, e)
	var defs []toolbox.Tool
	for _, tool := range e.Meta.Tools {
		// An entry names the tools of its own namespace only.
		if routing.Namespace(tool) != c.Namespace {
			continue
		}
		if _, action, _ := strings.Cut(tool, ":"); mcpname.Tool(action) != nil {
			cs.log.Warn().Str("capability", termsafe.Quote(c.Name, 0)).Str("tool", termsafe.Quote(tool, 0)).Msg("a tool of the capability is not listed: " + mcpname.Tool(action).Error())
			continue
		}
		cs.cloud.setRegEnv(tool, e.Meta.AllEnvRequired())
		d := tool + " (from " + e.FQDN + ", runs in the PML cloud)"
		if desc != "" {
			d = desc + " (" + d + ")"
		}
		defs = append(defs, toolbox.Tool{Name: tool, Description: d, InputSchema: schema})
	}
	return cs.servers.ReplaceTools(nil, defs, cs.cloud.Exec())
}

// ListEntry lists the functions of a deno entry a tool call found in a
// registry (the registry layer), as listDeno does an added capability's.
func (cs *Capabilities) ListEntry(e *registry.Entry, namespace string) []string {
	return cs.listDeno(Capability{Name: namespace, Namespace: namespace, FQDN: e.FQDN}, e)
}

// objectSchema checks that a registry's input schema is one MCP accepts
// and pml can check arguments against: a valid JSON schema of an object.
func objectSchema(raw json.RawMessage) error {
	var s jsonschema.Schema
	if err := json.Unmarshal(raw, &s); err != nil {
		return fmt.Errorf("the input schema is not a JSON schema: %v", err)
	}
	if s.Type != "object" {
		return fmt.Errorf(`the input schema's "type" is %q, not "object"`, s.Type)
	}
	if _, err := s.Resolve(nil); err != nil {
		return fmt.Errorf("the input schema is not valid: %v", err)
	}
	return nil
}

// WatchAdded lists capabilities added or removed while a session runs
// (pml add and pml remove are other processes). It polls the file's size
// and time once a second: .pml/ may not exist yet when the session
// starts, and a stat is cheaper than watching the workspace for it.
func (cs *Capabilities) WatchAdded(ctx context.Context) {
	path := filepath.Join(cs.ws, CapabilitiesFile)
	// A session whose client has not listed its tools yet still fetches
	// the named capabilities: what is missing is known once listed here.
	cs.added.mu.Lock()
	loaded := cs.added.listed != nil
	cs.added.mu.Unlock()
	if !loaded {
		panics.Guarded(cs.log, "capabilities", "listing the added capabilities", cs.LoadAdded)
	}
	cs.fetchNamed(ctx)
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		cs.added.mu.Lock()
		last := cs.added.stamp
		cs.added.mu.Unlock()
		if !stampOf(path).same(last) {
			panics.Guarded(cs.log, "capabilities", "listing the added capabilities", cs.LoadAdded)
		}
		// The named capabilities not fetched yet: in the background, once
		// each, so no listing waits for a registry.
		cs.fetchNamed(ctx)
	}
}

// unhashed is a locked 5-part name without its last part (the hash of the
// code): acme.tools.text.upper.c08d -> acme.tools.text.upper.
func unhashed(fqdn string) string {
	if i := strings.LastIndexByte(fqdn, '.'); i > 0 && strings.Count(fqdn, ".") == 4 {
		return fqdn[:i]
	}
	return fqdn
}

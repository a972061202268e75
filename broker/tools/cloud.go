package tools

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/rs/zerolog"

	"github.com/pml-dev/pml/broker/call"
	"github.com/pml-dev/pml/broker/workflow"
	"github.com/pml-dev/pml/internal/cloud"
	"github.com/pml-dev/pml/internal/config"
	"github.com/pml-dev/pml/internal/credentials"
	"github.com/pml-dev/pml/internal/entrygrant"
	"github.com/pml-dev/pml/internal/keysafe"
	"github.com/pml-dev/pml/internal/registry"
	"github.com/pml-dev/pml/internal/routing"
	"github.com/pml-dev/pml/internal/safefs"
	"github.com/pml-dev/pml/internal/toolbox"
	"github.com/pml-dev/pml/internal/vouch"
)

// ErrCloud: a server-routed call could not be forwarded (local mode,
// offline, refused key).
var ErrCloud = call.ErrCloud

// cloudToolsFile caches the cloud's tools/list so an offline start still
// lists them (calls then answer that the cloud is unreachable).
const cloudToolsFile = ".pml/cloud-tools-cache.json"

// listWait bounds how long the first tools/list waits for the cloud's list.
const listWait = 2 * time.Second

// Cloud is the broker's view of the PML cloud: its client, the routing
// table, the tools it lists. It holds what it uses, never the *Broker.
// Safe for concurrent use.
type Cloud struct {
	Client *cloud.Client
	router *routing.Router

	sb  Sandbox
	ws  string
	cfg *config.Config
	log zerolog.Logger
	// servers are the configured servers (a local one wins over the
	// cloud) and the tool table its tools go in.
	servers *Servers
	// exec runs its tools (sandbox.CloudExec).
	exec Executors
	// Ask writes an approval's text (approve.Approver); set in New once
	// the approver is built, before any call.
	Ask Approvals

	mu    sync.Mutex
	names []string            // registered cloud tool names
	env   map[string][]string // tool → BYOK variables it declares (cloud list)
	// regEnv: the same for tools of registry http entries, kept apart so
	// a refresh of the cloud's list does not drop them.
	regEnv map[string][]string
	// regGrant: what each such tool's calls send (its variables, the
	// cloud.url and proxy_to hosts), which the person must have granted
	// (registry_grant.go).
	regGrant map[string]entrygrant.Grant
	// ready closes when the first refresh after start has ended (either
	// way); a tools/list waits for it at most listWait.
	ready     chan struct{}
	readyOnce sync.Once
}

// NewRouter is the routing table of workspace ws: the built-in groups
// and the configured servers run here (Servers adds the servers that
// join later).
func NewRouter(ws string, servers map[string]config.Server) *routing.Router {
	local := []string{"filesystem", "shell"}
	for name := range servers {
		local = append(local, name)
	}
	return routing.New(ws, local)
}

// CloudOptions are what NewCloud is given.
type CloudOptions struct {
	Sandbox Sandbox
	Config  *config.Config
	Log     zerolog.Logger
	// HTTPClient talks to the cloud; nil: a default one.
	HTTPClient *http.Client
	Router     *routing.Router
	Servers    *Servers
	Executors  Executors
}

// NewCloud makes the cloud's client and lists the cloud's tools from
// the cache; it contacts nothing.
func NewCloud(o CloudOptions) *Cloud {
	c := &Cloud{sb: o.Sandbox, ws: o.Sandbox.Workspace(), cfg: o.Config, log: o.Log, router: o.Router, servers: o.Servers, exec: o.Executors}
	hc := o.HTTPClient
	if hc == nil {
		hc = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	}
	// PML_API_KEY, else the user's credentials file (pml init --api-key):
	// the key never has to sit in a project file.
	key, _, err := credentials.APIKey(os.Getenv)
	if err != nil {
		c.log.Warn().Err(err).Msg("local mode: the API key could not be read; fix the file or set PML_API_KEY")
	}
	c.Client = &cloud.Client{URL: c.cfg.Cloud.URL, APIKey: key, HTTP: hc, Timeout: c.cfg.Cloud.Timeout}
	c.env = map[string][]string{}
	c.regEnv = map[string][]string{}
	c.regGrant = map[string]entrygrant.Grant{}
	c.ready = make(chan struct{})
	if !c.Client.Enabled() {
		c.readyOnce.Do(func() { close(c.ready) })
		return c
	}
	// Listed at once from the cache, refreshed by StartCloud.
	if tools, err := readCloudTools(c.ws, filepath.Join(c.ws, cloudToolsFile)); err == nil {
		c.RegisterTools(tools)
	} else if errors.Is(err, errCloudToolsUnvouched) {
		c.log.Warn().Str("path", filepath.Join(c.ws, cloudToolsFile)).Msg(err.Error() + "; the cloud's tools are listed once it answers")
	}
	return c
}

// Exec is what runs the cloud's tools.
func (c *Cloud) Exec() Executor { return c.exec.Cloud() }

// KeyNames are the variables tool declares it needs (BYOK), from the
// cloud's list or its registry entry.
func (c *Cloud) KeyNames(tool string) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	names := append([]string(nil), c.env[tool]...)
	return append(names, c.regEnv[tool]...)
}

// StartCloud syncs the routing table and the cloud's tool list in the
// background. It never blocks: initialize must not wait for the network.
// In local mode (no PML_API_KEY) pml does not contact the cloud at all.
func (c *Cloud) StartCloud(ctx context.Context) {
	if !c.Client.Enabled() {
		c.log.Info().Msg("local mode: PML_API_KEY is not set and no key is in the credentials file (pml init --api-key), so cloud tools are off; local tools work")
		return
	}
	if err := keysafe.Check("cloud.url", c.Client.URL); err != nil {
		// Said once at start; every request is refused the same way
		// (internal/keysafe), so cloud tools answer with this too.
		c.log.Error().Err(err).Str("cloud_url", c.Client.URL).Msg("cloud tools are off: the API key is not sent to this cloud.url")
		c.readyOnce.Do(func() { close(c.ready) })
		return
	}
	go func() {
		defer c.readyOnce.Do(func() { close(c.ready) })
		sctx, cancel := context.WithTimeout(ctx, c.cfg.Cloud.Timeout)
		defer cancel()
		if err := c.router.Sync(sctx, c.Client.HTTP, c.Client.URL, c.Client.APIKey); err != nil {
			c.log.Warn().Err(err).Str("routing", c.router.Table().Version).Msg("routing sync failed; using the cached or embedded table")
		} else {
			c.log.Debug().Str("version", c.router.Table().Version).Msg("routing table synced")
		}
		tools, err := c.Client.ListTools(sctx)
		if err != nil {
			c.log.Warn().Err(err).Msg("could not list the cloud's tools; cloud tools from the last session stay listed")
			return
		}
		c.RegisterTools(tools)
		c.writeCloudTools(tools)
	}()
}

// Wait lets the first tools/list include the cloud's tools when they
// come quickly; later ones arrive with notifications/tools/list_changed.
func (c *Cloud) Wait(ctx context.Context) {
	t := time.NewTimer(listWait)
	defer t.Stop()
	select {
	case <-c.ready:
	case <-t.C:
	case <-ctx.Done():
	}
}

// RegisterTools lists the cloud's server-routed tools. A tool whose
// namespace runs here (the toolbox, a configured server, anything the
// routing does not send to the cloud) is left out: its calls must never
// leave the machine.
func (c *Cloud) RegisterTools(tools []*mcp.Tool) {
	var defs []toolbox.Tool
	env := map[string][]string{}
	for _, t := range tools {
		if !c.servers.CloudListable("the PML cloud", t) || t.Name == call.ContinueTool || c.router.Route(t.Name) != routing.Server {
			continue
		}
		defs = append(defs, toolDef(t.Name, t, " (runs in the PML cloud)"))
		env[t.Name] = cloud.EnvRequired(t)
	}
	c.mu.Lock()
	old := c.names
	c.env = env
	c.mu.Unlock()
	names := c.servers.ReplaceTools(old, defs, c.Exec())
	c.mu.Lock()
	c.names = names
	c.mu.Unlock()
}

// cloudToolsRecord is the file cloudToolsFile: the cloud's list and this
// user's vouch over it (internal/vouch). A repository can commit the
// file; what it lists would be offered, and the variables a tool declares
// (pml/env_required) sent to the cloud as its keys, while the cloud cannot
// list. A file without a vouch that verifies is not read.
type cloudToolsRecord struct {
	Tools json.RawMessage `json:"tools"`
	Vouch string          `json:"vouch"`
}

// errCloudToolsUnvouched: the cache was not written by this user's pml
// for this workspace.
var errCloudToolsUnvouched = errors.New("the cloud's cached tool list carries no vouch of this user's pml (the repository or another machine wrote it); it is not used")

func readCloudTools(ws, path string) ([]*mcp.Tool, error) {
	data, err := safefs.ReadFile(ws, path, safefs.MaxConfig)
	if err != nil {
		return nil, err
	}
	var rec cloudToolsRecord
	if err := json.Unmarshal(data, &rec); err != nil {
		return nil, errCloudToolsUnvouched
	}
	var compact bytes.Buffer
	if err := json.Compact(&compact, rec.Tools); err != nil || !vouch.Check(ws, vouch.CloudTools, cloudToolsFile, compact.Bytes(), rec.Vouch) {
		return nil, errCloudToolsUnvouched
	}
	var tools []*mcp.Tool
	return tools, json.Unmarshal(compact.Bytes(), &tools)
}

func (c *Cloud) writeCloudTools(tools []*mcp.Tool) {
	list, err := json.Marshal(tools)
	if err != nil {
		return
	}
	sum, err := vouch.Seal(c.ws, vouch.CloudTools, cloudToolsFile, list)
	if err != nil {
		c.log.Warn().Err(err).Msg("caching the cloud's tool list: pml's vouching key cannot be had, so the list is not kept for an offline start")
		return
	}
	data, err := json.MarshalIndent(cloudToolsRecord{Tools: list, Vouch: sum}, "", "  ")
	if err != nil {
		return
	}
	path := filepath.Join(c.ws, cloudToolsFile)
	if err := safefs.MkdirAll(c.ws, filepath.Dir(path), 0o755); err == nil {
		if err := safefs.WriteFile(c.ws, path, append(data, '\n'), 0o644); err != nil {
			c.log.Warn().Err(err).Msg("caching the cloud's tool list")
		}
	}
}

// RegGrantOf is what a registry http entry's tool sends, when tool is
// one.
func (c *Cloud) RegGrantOf(tool string) (entrygrant.Grant, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	g, ok := c.regGrant[tool]
	return g, ok
}

// IsCloudTool reports whether a call goes to the cloud: its namespace is
// server-routed and nothing local has that name.
func (c *Cloud) IsCloudTool(name string) bool {
	return name != call.ContinueTool && c.servers.ServerOf(name) == nil && c.router.Route(name) == routing.Server
}

// APIKeyApproval describes a missing BYOK key for a person.
func (c *Cloud) APIKeyApproval(wf *workflow.Workflow) workflow.Approval {
	a := c.Ask.Approval(wf)
	_, missing := c.sb.HostValues(wf.Tool, c.KeyNames(wf.Tool))
	a.Description = fmt.Sprintf("%s runs in the PML cloud with your own API key %s, which is not set. Set it (%s), then continue.",
		wf.Tool, strings.Join(missing, ", "), WhereToSet(c.ws))
	a.Options = []string{"continue", "abort"}
	a.Context = map[string]any{"variables": missing, "env_file": filepath.Join(c.ws, ".env"), "pattern": wf.Pattern}
	return a
}

// WhereToSet says where a missing variable of a cloud tool is set.
func WhereToSet(ws string) string {
	return fmt.Sprintf("add it to %s or to the env of the pml entry in your MCP client's configuration (e.g. .mcp.json)", filepath.Join(ws, ".env"))
}

// AddLocal tells the routing table that namespace ns runs here.
func (c *Cloud) AddLocal(ns string) { c.router.AddLocal(ns) }

// useEntry routes a registry http entry's namespace ns to the cloud and
// records what tool's calls send (its variables, and the grant they
// need).
func (c *Cloud) useEntry(e *registry.Entry, ns, tool string) {
	c.router.AddServer(ns)
	g := httpGrant(e, ns, c.Client.URL)
	c.mu.Lock()
	defer c.mu.Unlock()
	if e.Meta != nil {
		c.regEnv[tool] = e.Meta.AllEnvRequired()
	}
	c.regGrant[tool] = g
}

// setRegEnv records the variables tool of an added cloud entry needs.
func (c *Cloud) setRegEnv(tool string, env []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.regEnv[tool] = env
}

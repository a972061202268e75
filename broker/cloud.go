package broker

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
	sbx "github.com/pml-dev/pml/broker/sandbox"
	"github.com/pml-dev/pml/internal/cloud"
	"github.com/pml-dev/pml/internal/config"
	"github.com/pml-dev/pml/internal/credentials"
	"github.com/pml-dev/pml/internal/entrygrant"
	"github.com/pml-dev/pml/internal/keysafe"
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

// cloudSide is the broker's view of the PML cloud: its client, the
// routing table, the tools it lists. It holds what it uses, never the
// *Broker: the functions of the tool table, the servers and the approval
// texts are wired in New.
type cloudSide struct {
	client *cloud.Client
	router *routing.Router

	sb  *sandbox
	cfg *config.Config
	log zerolog.Logger
	// serverOf finds a configured server (servers); listable and
	// replaceTools are the tool table's; approval the plain text of an
	// approval (approval_text.go).
	serverOf     func(tool string) *server
	listable     func(source string, t *mcp.Tool) bool
	replaceTools func(old []string, defs []toolbox.Tool, exec executor) []string
	approval     func(wf *Workflow) Approval
	// decide and permSource are the permissions' (permit.LivePermissions):
	// the tools an execute_locally answer declares are decided with them
	// before its code runs (cloud_exec.go, declaredOfPayload).
	decide     func(tool string) (Decision, string)
	permSource func() string

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
	// exec runs its tools (sandbox.CloudExec).
	exec executor
}

// setupCloud builds the router and the cloud client; it contacts nothing.
// runs starts the code an execute_locally answer carries.
func (c *cloudSide) setupCloud(o Options, runs *codeRuns) {
	local := []string{"filesystem", "shell"}
	for name := range c.cfg.Servers {
		local = append(local, name)
	}
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
	c.client = &cloud.Client{URL: c.cfg.Cloud.URL, APIKey: key, HTTP: hc, Timeout: c.cfg.Cloud.Timeout}
	c.router = routing.New(c.sb.Workspace, local)
	c.env = map[string][]string{}
	c.regEnv = map[string][]string{}
	c.regGrant = map[string]entrygrant.Grant{}
	c.ready = make(chan struct{})
	c.exec = sbx.NewCloudExec(cloudTools{c}, runs)
	if !c.client.Enabled() {
		c.readyOnce.Do(func() { close(c.ready) })
		return
	}
	// Listed at once from the cache, refreshed by StartCloud.
	if tools, err := readCloudTools(c.sb.Workspace, filepath.Join(c.sb.Workspace, cloudToolsFile)); err == nil {
		c.registerCloudTools(tools)
	} else if errors.Is(err, errCloudToolsUnvouched) {
		c.log.Warn().Str("path", filepath.Join(c.sb.Workspace, cloudToolsFile)).Msg(err.Error() + "; the cloud's tools are listed once it answers")
	}
}

// StartCloud syncs the routing table and the cloud's tool list in the
// background. It never blocks: initialize must not wait for the network.
// In local mode (no PML_API_KEY) pml does not contact the cloud at all.
func (b *Broker) StartCloud(ctx context.Context) { b.cloud.StartCloud(ctx) }

// StartCloud is Broker.StartCloud.
func (c *cloudSide) StartCloud(ctx context.Context) {
	if !c.client.Enabled() {
		c.log.Info().Msg("local mode: PML_API_KEY is not set and no key is in the credentials file (pml init --api-key), so cloud tools are off; local tools work")
		return
	}
	if err := keysafe.Check("cloud.url", c.client.URL); err != nil {
		// Said once at start; every request is refused the same way
		// (internal/keysafe), so cloud tools answer with this too.
		c.log.Error().Err(err).Str("cloud_url", c.client.URL).Msg("cloud tools are off: the API key is not sent to this cloud.url")
		c.readyOnce.Do(func() { close(c.ready) })
		return
	}
	go func() {
		defer c.readyOnce.Do(func() { close(c.ready) })
		sctx, cancel := context.WithTimeout(ctx, c.cfg.Cloud.Timeout)
		defer cancel()
		if err := c.router.Sync(sctx, c.client.HTTP, c.client.URL, c.client.APIKey); err != nil {
			c.log.Warn().Err(err).Str("routing", c.router.Table().Version).Msg("routing sync failed; using the cached or embedded table")
		} else {
			c.log.Debug().Str("version", c.router.Table().Version).Msg("routing table synced")
		}
		tools, err := c.client.ListTools(sctx)
		if err != nil {
			c.log.Warn().Err(err).Msg("could not list the cloud's tools; cloud tools from the last session stay listed")
			return
		}
		c.registerCloudTools(tools)
		c.writeCloudTools(tools)
	}()
}

// waitCloud lets the first tools/list include the cloud's tools when they
// come quickly; later ones arrive with notifications/tools/list_changed.
func (c *cloudSide) waitCloud(ctx context.Context) {
	t := time.NewTimer(listWait)
	defer t.Stop()
	select {
	case <-c.ready:
	case <-t.C:
	case <-ctx.Done():
	}
}

// registerCloudTools lists the cloud's server-routed tools. A tool whose
// namespace runs here (the toolbox, a configured server, anything the
// routing does not send to the cloud) is left out: its calls must never
// leave the machine.
func (c *cloudSide) registerCloudTools(tools []*mcp.Tool) {
	var defs []toolbox.Tool
	env := map[string][]string{}
	for _, t := range tools {
		if !c.listable("the PML cloud", t) || t.Name == ContinueTool || c.router.Route(t.Name) != routing.Server {
			continue
		}
		schema, _ := json.Marshal(t.InputSchema)
		if len(schema) == 0 || string(schema) == "null" {
			schema = json.RawMessage(`{"type":"object"}`)
		}
		desc := t.Description
		if desc == "" {
			desc = t.Title
		}
		defs = append(defs, toolbox.Tool{Name: t.Name, Description: desc + " (runs in the PML cloud)", InputSchema: schema, Title: t.Title, Annotations: t.Annotations})
		env[t.Name] = cloud.EnvRequired(t)
	}
	c.mu.Lock()
	old := c.names
	c.env = env
	c.mu.Unlock()
	names := c.replaceTools(old, defs, c.exec)
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

func (c *cloudSide) writeCloudTools(tools []*mcp.Tool) {
	list, err := json.Marshal(tools)
	if err != nil {
		return
	}
	sum, err := vouch.Seal(c.sb.Workspace, vouch.CloudTools, cloudToolsFile, list)
	if err != nil {
		c.log.Warn().Err(err).Msg("caching the cloud's tool list: pml's vouching key cannot be had, so the list is not kept for an offline start")
		return
	}
	data, err := json.MarshalIndent(cloudToolsRecord{Tools: list, Vouch: sum}, "", "  ")
	if err != nil {
		return
	}
	path := filepath.Join(c.sb.Workspace, cloudToolsFile)
	if err := safefs.MkdirAll(c.sb.Workspace, filepath.Dir(path), 0o755); err == nil {
		if err := safefs.WriteFile(c.sb.Workspace, path, append(data, '\n'), 0o644); err != nil {
			c.log.Warn().Err(err).Msg("caching the cloud's tool list")
		}
	}
}

// regGrantOf is what a registry http entry's tool sends, when tool is
// one.
func (c *cloudSide) regGrantOf(tool string) (entrygrant.Grant, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	g, ok := c.regGrant[tool]
	return g, ok
}

// isCloudTool reports whether a call goes to the cloud: its namespace is
// server-routed and nothing local has that name.
func (c *cloudSide) isCloudTool(name string) bool {
	return name != ContinueTool && c.serverOf(name) == nil && c.router.Route(name) == routing.Server
}

// apiKeyApproval describes a missing BYOK key for a person.
func (c *cloudSide) apiKeyApproval(wf *Workflow) Approval {
	a := c.approval(wf)
	_, missing := byokFor(c.sb, c, wf.Tool)
	a.Description = fmt.Sprintf("%s runs in the PML cloud with your own API key %s, which is not set. Set it (%s), then continue.",
		wf.Tool, strings.Join(missing, ", "), whereToSet(c.sb.Workspace))
	a.Options = []string{"continue", "abort"}
	a.Context = map[string]any{"variables": missing, "env_file": filepath.Join(c.sb.Workspace, ".env"), "pattern": wf.Pattern}
	return a
}

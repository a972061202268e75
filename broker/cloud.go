package broker

import (
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

	"github.com/pml-dev/pml/internal/cloud"
	"github.com/pml-dev/pml/internal/credentials"
	"github.com/pml-dev/pml/internal/keysafe"
	"github.com/pml-dev/pml/internal/routing"
	"github.com/pml-dev/pml/internal/safefs"
	"github.com/pml-dev/pml/internal/toolbox"
)

// ErrCloud: a server-routed call could not be forwarded (local mode,
// offline, refused key).
var ErrCloud = errors.New("cloud")

// cloudToolsFile caches the cloud's tools/list so an offline start still
// lists them (calls then answer that the cloud is unreachable).
const cloudToolsFile = ".pml/cloud-tools-cache.json"

// listWait bounds how long the first tools/list waits for the cloud's list.
const listWait = 2 * time.Second

// cloudSide is the broker's view of the PML cloud.
type cloudSide struct {
	client *cloud.Client
	router *routing.Router

	mu    sync.Mutex
	names []string            // registered cloud tool names
	env   map[string][]string // tool → BYOK variables it declares (cloud list)
	// regEnv: the same for tools of registry http entries, kept apart so
	// a refresh of the cloud's list does not drop them.
	regEnv map[string][]string
	// ready closes when the first refresh after start has ended (either
	// way); a tools/list waits for it at most listWait.
	ready     chan struct{}
	readyOnce sync.Once
	// exec runs its tools (cloudExec).
	exec executor
}

// setupCloud builds the router and the cloud client; it contacts nothing.
func (b *Broker) setupCloud(o Options) {
	local := []string{"filesystem", "shell"}
	for name := range b.cfg.Servers {
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
		b.log.Warn().Err(err).Msg("local mode: the API key could not be read; fix the file or set PML_API_KEY")
	}
	b.cloud = &cloudSide{
		client: &cloud.Client{URL: b.cfg.Cloud.URL, APIKey: key, HTTP: hc, Timeout: b.cfg.Cloud.Timeout},
		router: routing.New(b.sb.ws, local),
		env:    map[string][]string{},
		regEnv: map[string][]string{},
		ready:  make(chan struct{}),
	}
	b.cloud.exec = cloudExec{sb: b.sb, cloud: b.cloud, runs: b.runs}
	if !b.cloud.client.Enabled() {
		b.cloud.readyOnce.Do(func() { close(b.cloud.ready) })
		return
	}
	// Listed at once from the cache, refreshed by StartCloud.
	if tools, err := readCloudTools(b.sb.ws, filepath.Join(b.sb.ws, cloudToolsFile)); err == nil {
		b.registerCloudTools(tools)
	}
}

// StartCloud syncs the routing table and the cloud's tool list in the
// background. It never blocks: initialize must not wait for the network.
// In local mode (no PML_API_KEY) pml does not contact the cloud at all.
func (b *Broker) StartCloud(ctx context.Context) {
	c := b.cloud
	if !c.client.Enabled() {
		b.log.Info().Msg("local mode: PML_API_KEY is not set and no key is in the credentials file (pml init --api-key), so cloud tools are off; local tools work")
		return
	}
	if err := keysafe.Check("cloud.url", c.client.URL); err != nil {
		// Said once at start; every request is refused the same way
		// (internal/keysafe), so cloud tools answer with this too.
		b.log.Error().Err(err).Str("cloud_url", c.client.URL).Msg("cloud tools are off: the API key is not sent to this cloud.url")
		c.readyOnce.Do(func() { close(c.ready) })
		return
	}
	go func() {
		defer c.readyOnce.Do(func() { close(c.ready) })
		sctx, cancel := context.WithTimeout(ctx, b.cfg.Cloud.Timeout)
		defer cancel()
		if err := c.router.Sync(sctx, c.client.HTTP, c.client.URL, c.client.APIKey); err != nil {
			b.log.Warn().Err(err).Str("routing", c.router.Table().Version).Msg("routing sync failed; using the cached or embedded table")
		} else {
			b.log.Debug().Str("version", c.router.Table().Version).Msg("routing table synced")
		}
		tools, err := c.client.ListTools(sctx)
		if err != nil {
			b.log.Warn().Err(err).Msg("could not list the cloud's tools; cloud tools from the last session stay listed")
			return
		}
		b.registerCloudTools(tools)
		b.writeCloudTools(tools)
	}()
}

// waitCloud lets the first tools/list include the cloud's tools when they
// come quickly; later ones arrive with notifications/tools/list_changed.
func (b *Broker) waitCloud(ctx context.Context) {
	t := time.NewTimer(listWait)
	defer t.Stop()
	select {
	case <-b.cloud.ready:
	case <-t.C:
	case <-ctx.Done():
	}
}

// registerCloudTools lists the cloud's server-routed tools. A tool whose
// namespace runs here (the toolbox, a configured server, anything the
// routing does not send to the cloud) is left out: its calls must never
// leave the machine.
func (b *Broker) registerCloudTools(tools []*mcp.Tool) {
	var defs []toolbox.Tool
	env := map[string][]string{}
	for _, t := range tools {
		if !b.srv.listable("the PML cloud", t) || t.Name == ContinueTool || b.cloud.router.Route(t.Name) != routing.Server {
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
	c := b.cloud
	c.mu.Lock()
	old := c.names
	c.env = env
	c.mu.Unlock()
	names := b.srv.replaceTools(old, defs, c.exec)
	c.mu.Lock()
	c.names = names
	c.mu.Unlock()
}

func readCloudTools(ws, path string) ([]*mcp.Tool, error) {
	data, err := safefs.ReadFile(ws, path, safefs.MaxConfig)
	if err != nil {
		return nil, err
	}
	var tools []*mcp.Tool
	return tools, json.Unmarshal(data, &tools)
}

func (b *Broker) writeCloudTools(tools []*mcp.Tool) {
	data, err := json.MarshalIndent(tools, "", "  ")
	if err != nil {
		return
	}
	path := filepath.Join(b.sb.ws, cloudToolsFile)
	if err := safefs.MkdirAll(b.sb.ws, filepath.Dir(path), 0o755); err == nil {
		if err := safefs.WriteFile(b.sb.ws, path, append(data, '\n'), 0o644); err != nil {
			b.log.Warn().Err(err).Msg("caching the cloud's tool list")
		}
	}
}

// isCloudTool reports whether a call goes to the cloud: its namespace is
// server-routed and nothing local has that name.
func (b *Broker) isCloudTool(name string) bool {
	return name != ContinueTool && b.srv.serverOf(name) == nil && b.cloud.router.Route(name) == routing.Server
}

// apiKeyApproval describes a missing BYOK key for a person.
func (b *Broker) apiKeyApproval(wf *Workflow) Approval {
	a := b.approval(wf)
	_, missing := byokFor(b.sb, b.cloud, wf.Tool)
	a.Description = fmt.Sprintf("%s runs in the PML cloud with your own API key %s, which is not set. Set it (%s), then continue.",
		wf.Tool, strings.Join(missing, ", "), whereToSet(b.sb.ws))
	a.Options = []string{"continue", "abort"}
	a.Context = map[string]any{"variables": missing, "env_file": filepath.Join(b.sb.ws, ".env"), "pattern": wf.Pattern}
	return a
}

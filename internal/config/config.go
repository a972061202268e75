// Package config reads .pml.json (with PML_* environment overrides) into
// typed settings, with errors that name the file, the key
// and the problem. Unknown keys are reported as warnings and never dropped:
// pml keeps the raw document so later rewrites can preserve them.
//
// The keys are tables: keys.go lists every top-level setting (key, kind,
// field, default, check), servers.go every key of a server and of its
// install step; adding a key is adding a row. edit.go rewrites .pml.json
// (permissions.allow) keeping every other key and its order.
package config

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/pml-dev/pml/internal/jsonpos"
	"github.com/pml-dev/pml/internal/safefs"
)

// FileName is the project configuration file, at the workspace root: the
// team's policy, committed.
const FileName = ".pml.json"

// LocalFileName holds a person's own overrides of FileName, beside it;
// pml init adds it to .gitignore. The same trust rules apply to both.
const LocalFileName = ".pml.local.json"

// Config is the effective configuration.
type Config struct {
	// Path is the .pml.json path (it may not exist).
	Path string
	// LocalPath is .pml.local.json beside it: personal overrides, not
	// committed; LocalExists when it was found. Its keys win over
	// .pml.json's, except the permission lists, which add to them.
	LocalPath   string
	LocalExists bool
	// Sum is the sha256 (hex) of the exact bytes of .pml.json that this
	// configuration was parsed from ("" without a file): trust is by
	// content (internal/trust), and it must be the content that applies,
	// not a second read of a file a container may have swapped meanwhile.
	Sum string
	// FileSum and LocalSum are the full sha256 (hex) of the exact bytes of
	// .pml.json and of .pml.local.json ("" for a file that is absent): a
	// trust record holds both (internal/trust).
	FileSum, LocalSum string
	// Exists is true when .pml.json was found. Then its permissions are the
	// only source of permissions.
	Exists      bool
	Permissions Permissions
	Sandbox     Sandbox
	HIL         HIL
	// Servers are the stdio MCP servers of mcps and private_mcps, by name.
	Servers map[string]Server
	Cloud   Cloud
	// Telemetry is where traces and metrics go (docs/observability.md);
	// the OTEL_* variables win over it.
	Telemetry Telemetry
	// Registries are the registry base URLs, first match wins (default:
	// the cloud URL).
	Registries []string
	// RegistriesSet: registries was configured (file or PML_REGISTRIES),
	// not defaulted to the cloud.
	RegistriesSet bool
	// Capabilities are the registry capabilities the project declares
	// (capabilities), as the seeds write them (internal/capname): pml
	// stdio lists their tools, fetching and pinning one not fetched yet.
	Capabilities []string
	// Warnings are non-fatal findings (unknown keys), one sentence each.
	Warnings []string
	// Raw is the document as read, unknown keys included.
	Raw map[string]any
	// local is .pml.local.json as read (nil: none).
	local map[string]any
	// Runtime is the container runtime: "docker" (default) or
	// "kubernetes" (runtime.go).
	Runtime    string
	Kubernetes Kubernetes
	// Sources names where each key that has a value came from: the file's
	// path, or the environment variable that overrides it
	// ("PML_PERMISSIONS_DENY"). A refusal says which (Source).
	Sources map[string]string
}

// Source names where key's value came from: the file, the environment
// variable, or "" when it is pml's default.
func (c *Config) Source(key string) string {
	if c == nil {
		return ""
	}
	return c.Sources[key]
}

// Permissions are glob patterns on tool names ("filesystem:*", "*").
type Permissions struct {
	Allow []string
	Ask   []string
	Deny  []string
}

// Sandbox overrides the container policy. Zero values mean "policy default".
type Sandbox struct {
	Memory     string
	CPUs       float64
	Pids       int64
	Timeout    time.Duration
	User       string
	ShellImage string
	// Runtime is sandbox.runtime: the engine's OCI runtime tool
	// containers run on ("default", "runsc", "auto"; runtime.go).
	Runtime string
	// IdleTimeout stops a pooled server after this long without calls.
	IdleTimeout time.Duration
	// Prestart is sandbox.prestart: "on" starts, when a session starts,
	// the pooled container of every configured server whose calls need
	// no question (prestart.go in broker/tools); "off" waits for the
	// first call.
	Prestart string
	// Standby is sandbox.standby: how long a standby container of a
	// pooled server waits for the next session ("off": none; see
	// StandbyWait).
	Standby string
	Pool    Pool
	// MaxContainers caps the containers one pml runs at once (0: the
	// default, from the CPU count); calls beyond it queue.
	MaxContainers int
	// SharedPaths lists what a container engine in a VM or on another
	// host can bind-mount (sandbox.shared_paths; nil: its defaults).
	SharedPaths []string
	// Mounts are extra host paths for tool containers (sandbox.mounts;
	// mounts.go): grants, read-only by default.
	Mounts []Mount
	// Network is what shell:exec may reach through pml's egress proxy
	// (sandbox.network; network.go).
	Network Network
}

// Pool sizes the pre-started single-use container pool, per kind of
// container. Zero values mean "default".
type Pool struct {
	Min int
	Max int
}

// Cloud is where server-routed tools are forwarded.
type Cloud struct {
	// URL is the cloud's base URL (default DefaultCloudURL).
	URL string
	// Timeout bounds one forwarded request (default DefaultCloudTimeout).
	Timeout time.Duration
}

// DefaultCloudURL is the PML cloud.
const DefaultCloudURL = "https://pml.casys.ai"

// DefaultCloudTimeout bounds one forwarded call.
const DefaultCloudTimeout = 60 * time.Second

// HIL configures human-in-the-loop approvals.
type HIL struct {
	// Timeout is how long an approval stays answerable (default 5 minutes).
	Timeout time.Duration
	// RequireElicitation (hil.require_elicitation): approvals are put to
	// the person only through the client's own dialog (MCP elicitation);
	// without it they fail closed, and answers relayed by the model
	// (continue_workflow) are refused.
	RequireElicitation bool
}

// DefaultHILTimeout is how long an approval workflow lives.
const DefaultHILTimeout = 5 * time.Minute

// DefaultShellImage is built locally by `pml images build` (busybox-static).
const DefaultShellImage = "pml/shell:busybox"

// Error is a configuration problem. Key is empty for whole-file problems.
// File is the file's path, or the environment variable the value came
// from; Line, when known, is the key's line in the file.
type Error struct {
	File, Key, Problem string
	Line               int
}

func (e *Error) Error() string {
	where := e.File
	if e.Line > 0 {
		where = fmt.Sprintf("%s:%d", e.File, e.Line)
	}
	if e.Key == "" {
		return fmt.Sprintf("%s: %s", where, e.Problem)
	}
	return fmt.Sprintf("%s: key %q: %s", where, e.Key, e.Problem)
}

// Load reads workspace/.pml.json, if any, and PML_* environment overrides
// (PML_SANDBOX_TIMEOUT=30s, PML_SANDBOX_MEMORY=1g, ...). env is os.Getenv in
// production. Every known key is a row of the table in keys.go.
func Load(workspace string, env func(string) string) (*Config, error) {
	path := filepath.Join(workspace, FileName)
	cfg := &Config{Path: path, LocalPath: filepath.Join(workspace, LocalFileName), Raw: map[string]any{}, Sources: map[string]string{}}
	data, err := readFile(workspace, cfg)
	if err != nil {
		return nil, err
	}
	local, localData, err := readJSON(workspace, LocalFileName, cfg.LocalPath)
	if err != nil {
		return nil, err
	}
	if local != nil {
		cfg.LocalExists, cfg.local = true, local
		cfg.Warnings = append(cfg.Warnings, unknownKeys(cfg.LocalPath, local)...)
		// Trust covers both files: the sum is of the pair.
		h := sha256.New()
		fmt.Fprintf(h, "%s\n", cfg.Sum)
		ls := sha256.Sum256(localData)
		cfg.LocalSum = hex.EncodeToString(ls[:])
		fmt.Fprintf(h, "%s:%x\n", LocalFileName, ls)
		cfg.Sum = hex.EncodeToString(h.Sum(nil))
	}
	return settle(cfg, data, env)
}

// readJSON reads a JSON object file beneath workspace through safefs;
// a missing file is (nil, nil, nil).
func readJSON(workspace, name, path string) (map[string]any, []byte, error) {
	data, err := safefs.ReadFile(workspace, name, safefs.MaxConfig)
	var refused *safefs.Error
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil, nil, nil
	case errors.As(err, &refused):
		return nil, nil, err
	case err != nil:
		return nil, nil, &Error{File: path, Problem: fmt.Sprintf("cannot be read: %v", err)}
	}
	if err := checkSyntax(path, data); err != nil {
		return nil, nil, err
	}
	raw := map[string]any{}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&raw); err != nil {
		return nil, nil, &Error{File: path, Problem: "the top level must be a JSON object"}
	}
	return raw, data, nil
}

// Parse is Load of data as the content of the .pml.json at path, with no
// environment: what a file grants on its own (pml's own writes compare
// the content before and after, internal/trust).
func Parse(path string, data []byte) (*Config, error) {
	cfg := &Config{Path: path, Raw: map[string]any{}, Sources: map[string]string{}}
	if data != nil {
		cfg.Exists = true
		sum := sha256.Sum256(data)
		cfg.Sum = hex.EncodeToString(sum[:])
		cfg.FileSum = cfg.Sum
		if err := checkSyntax(path, data); err != nil {
			return nil, err
		}
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		if err := dec.Decode(&cfg.Raw); err != nil {
			return nil, &Error{File: path, Problem: "the top level must be a JSON object"}
		}
	}
	return settle(cfg, data, func(string) string { return "" })
}

// settle reads every setting of cfg.Raw (and env) into cfg.
func settle(cfg *Config, data []byte, env func(string) string) (*Config, error) {
	path := cfg.Path
	errs := applySettings(cfg, env)
	servers, warnings, serr := loadServers(path, cfg.Raw)
	if cfg.local != nil {
		// A server of the local file replaces the team's of that name.
		mine, w, lerr := loadServers(cfg.LocalPath, cfg.local)
		for n, srv := range mine {
			servers[n] = srv
		}
		warnings, serr = append(warnings, w...), append(serr, lerr...)
	}
	cfg.Servers = servers
	cfg.Warnings = append(cfg.Warnings, warnings...)
	errs = append(errs, serr...)
	errs = append(errs, finish(cfg)...)
	errs = append(errs, checkMounts(cfg, env)...)
	placeErrors(path, data, errs)
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return cfg, nil
}

// readFile reads .pml.json into cfg.Raw and lists its unknown keys as
// warnings. A missing file is no error. It returns the bytes read.
//
// No viper here: the table in keys.go is the one source of file,
// environment and defaults (with errors naming the key and where its
// value came from), and viper's watch re-reads the file itself, through
// links and without safefs or the guard, so it cannot keep .pml.json
// live either (see Watch).
func readFile(workspace string, cfg *Config) ([]byte, error) {
	// Never through a link, never a FIFO or a huge file: the repository
	// is untrusted and pml may run as root (internal/safefs).
	data, err := safefs.ReadFile(workspace, FileName, safefs.MaxConfig)
	var refused *safefs.Error
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil, nil
	case errors.As(err, &refused):
		return nil, err
	case err != nil:
		return nil, &Error{File: cfg.Path, Problem: fmt.Sprintf("cannot be read: %v", err)}
	}
	cfg.Exists = true
	sum := sha256.Sum256(data)
	cfg.Sum = hex.EncodeToString(sum[:])
	cfg.FileSum = cfg.Sum
	if err := checkSyntax(cfg.Path, data); err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&cfg.Raw); err != nil {
		return nil, &Error{File: cfg.Path, Problem: "the top level must be a JSON object"}
	}
	cfg.Warnings = unknownKeys(cfg.Path, cfg.Raw)
	return data, nil
}

// applySettings sets every row of the table from the environment
// (PML_ and the key in capitals, dots as underscores), else from the
// file, else from the row's default. Environment values arrive as
// strings; file values keep their JSON type.
func applySettings(cfg *Config, env func(string) string) []error {
	var errs []error
	for _, s := range table(cfg) {
		if s.store == nil {
			continue
		}
		envName := EnvName(s.key)
		val, src, fromEnv := any(env(envName)), envName, true
		if val == "" {
			val, src, fromEnv = lookup(cfg.Raw, s.key), cfg.Path, false
			if lv := lookup(cfg.local, s.key); lv != nil {
				if mergesLists[s.key] && val != nil {
					val, src = unionLists(val, lv), cfg.Path+" and "+cfg.LocalPath
				} else {
					val, src = lv, cfg.LocalPath
				}
			}
		}
		if val == nil {
			s.reset()
			continue
		}
		cfg.Sources[s.key] = src
		if err := s.store(val, fromEnv); err != nil {
			errs = append(errs, keyed(src, s.key, err)...)
		}
	}
	return errs
}

// EnvName is the environment variable that overrides key: PML_ and the
// key in capitals, dots as underscores (sandbox.timeout:
// PML_SANDBOX_TIMEOUT).
func EnvName(key string) string {
	return "PML_" + strings.ToUpper(strings.ReplaceAll(key, ".", "_"))
}

// finish applies what spans several keys: the pool's bounds agree, and
// registries default to the cloud.
func finish(cfg *Config) []error {
	errs := sandboxNetwork(cfg)
	if p := cfg.Sandbox.Pool; p.Max > 0 && p.Min > p.Max {
		errs = append(errs, &Error{File: cfg.Path, Key: "sandbox.pool.min", Problem: fmt.Sprintf("must not be larger than sandbox.pool.max (%d > %d)", p.Min, p.Max)})
	}
	cfg.RegistriesSet = len(cfg.Registries) > 0
	if len(cfg.Registries) == 0 {
		cfg.Registries = []string{cfg.Cloud.URL}
	}
	return errs
}

// checkSyntax reports a JSON syntax error with its line and column.
func checkSyntax(path string, data []byte) error {
	var probe any
	err := json.Unmarshal(data, &probe)
	if err == nil {
		if _, ok := probe.(map[string]any); !ok {
			return &Error{File: path, Problem: "the top level must be a JSON object ({...})"}
		}
		return nil
	}
	var se *json.SyntaxError
	if errors.As(err, &se) {
		line, col := jsonpos.LineCol(data, se.Offset)
		return &Error{File: path, Problem: fmt.Sprintf("invalid JSON at line %d, column %d: %v", line, col, se)}
	}
	return &Error{File: path, Problem: "invalid JSON: " + err.Error()}
}

// unknownKeys lists keys pml does not understand, as warnings.
func unknownKeys(path string, raw map[string]any) []string {
	var out []string
	var walk func(prefix string, m map[string]any)
	walk = func(prefix string, m map[string]any) {
		for k, val := range m {
			key := k
			if prefix != "" {
				key = prefix + "." + k
			}
			if _, ok := known[key]; ok {
				continue
			}
			if sub, ok := val.(map[string]any); ok && hasKnownUnder(key) {
				walk(key, sub)
				continue
			}
			out = append(out, fmt.Sprintf("%s: unknown key %q is kept but ignored (check its spelling)", path, key))
		}
	}
	walk("", raw)
	sort.Strings(out)
	return out
}

func hasKnownUnder(prefix string) bool {
	for k := range known {
		if strings.HasPrefix(k, prefix+".") {
			return true
		}
	}
	return false
}

// mergesLists are the keys whose lists in .pml.local.json add to those of
// .pml.json rather than replace them: a person's own allow, ask and deny
// come on top of the team's, and never drop one of the team's denies.
var mergesLists = map[string]bool{"permissions.allow": true, "permissions.ask": true, "permissions.deny": true}

// unionLists is a followed by what b adds; either may be of the wrong
// type, which the key's own decoding then reports.
func unionLists(a, b any) any {
	la, ok1 := a.([]any)
	lb, ok2 := b.([]any)
	if !ok1 || !ok2 {
		return b
	}
	out := append([]any(nil), la...)
	for _, v := range lb {
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return out
}

// FromFiles reports whether key's value came from .pml.json or
// .pml.local.json (not from pml's environment or its defaults): only
// those need trust.
func (c *Config) FromFiles(key string) bool {
	src := c.Source(key)
	return src != "" && !strings.HasPrefix(src, "PML_")
}

// HasFile reports whether .pml.json or .pml.local.json was found: then
// their permissions are the only source of permissions (with the
// environment's lists on top).
func (c *Config) HasFile() bool { return c != nil && (c.Exists || c.LocalExists) }

// Telemetry is the .pml.json side of pml's OpenTelemetry export.
type Telemetry struct {
	// Endpoint is the OTLP/HTTP base URL (http://127.0.0.1:4318): traces
	// go to its /v1/traces, metrics to /v1/metrics. Empty: off, unless
	// the OTEL_* variables say otherwise.
	Endpoint string
}

// DefaultStandby is sandbox.standby's default: the idle timeout's.
const DefaultStandby = "5m"

// StandbyWait is sandbox.standby as a duration (0: off).
func (s Sandbox) StandbyWait() time.Duration {
	d, err := parseStandby(s.Standby)
	if err != nil {
		return 0
	}
	return d
}

// parseStandby reads sandbox.standby: "off", "0" or a duration.
func parseStandby(v string) (time.Duration, error) {
	switch v {
	case "":
		v = DefaultStandby
	case "off", "0":
		return 0, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("must be \"off\" or a duration such as \"5m\" (got %q)", v)
	}
	if d > maxStandby {
		return 0, fmt.Errorf("must be at most %s: a standby container outlives the session that left it by this long (got %q)", maxStandby, v)
	}
	return d, nil
}

// maxStandby bounds sandbox.standby: a repository's .pml.json can set it,
// and a container left for a day or a year after the session is not what
// a person who cloned it expects.
const maxStandby = time.Hour

func checkStandby(v string) error {
	_, err := parseStandby(v)
	return err
}

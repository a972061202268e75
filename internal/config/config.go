// Package config reads .pml.json (through viper, with PML_* environment
// overrides) into typed settings, with errors that name the file, the key
// and the problem. Unknown keys are reported as warnings and never dropped:
// pml keeps the raw document so later rewrites can preserve them.
package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	units "github.com/docker/go-units"
	"github.com/pml-dev/pml/internal/jsonpos"
	"github.com/pml-dev/pml/internal/safefs"
	"github.com/spf13/viper"
)

// FileName is the project configuration file, at the workspace root.
const FileName = ".pml.json"

// Config is the effective configuration.
type Config struct {
	// Path is the .pml.json path (it may not exist).
	Path string
	// Exists is true when .pml.json was found. Then its permissions are the
	// only source of permissions.
	Exists      bool
	Permissions Permissions
	Sandbox     Sandbox
	HIL         HIL
	// Servers are the stdio MCP servers of mcps and private_mcps, by name.
	Servers map[string]Server
	Cloud   Cloud
	// Registries are the registry base URLs, first match wins (default:
	// the cloud URL).
	Registries []string
	// RegistriesSet: registries was configured (file or PML_REGISTRIES),
	// not defaulted to the cloud.
	RegistriesSet bool
	// Warnings are non-fatal findings (unknown keys), one sentence each.
	Warnings []string
	// Raw is the document as read, unknown keys included.
	Raw map[string]any
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
	// IdleTimeout stops a pooled server after this long without calls.
	IdleTimeout time.Duration
	Pool        Pool
	// MaxContainers caps the containers one pml runs at once (0: the
	// default, from the CPU count); calls beyond it queue.
	MaxContainers int
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

// DefaultShellImage is built locally by `make images` (busybox-static).
const DefaultShellImage = "pml/shell:busybox"

// kind is the expected type of a known key.
type kind int

const (
	kString kind = iota
	kStringList
	kNumber
	kInteger
	kDuration
	kSize
	kBool
	kAny // known, owned by a later feature; accepted as is
)

// known lists the keys pml understands. Keys under an kAny prefix are not
// reported as unknown.
var known = map[string]kind{
	"permissions.allow":      kStringList,
	"permissions.ask":        kStringList,
	"permissions.deny":       kStringList,
	"sandbox.memory":         kSize,
	"sandbox.cpus":           kNumber,
	"sandbox.pids":           kInteger,
	"sandbox.timeout":        kDuration,
	"sandbox.user":           kString,
	"sandbox.shell_image":    kString,
	"sandbox.idle_timeout":   kDuration,
	"sandbox.pool.min":       kInteger,
	"sandbox.pool.max":       kInteger,
	"sandbox.max_containers": kInteger,
	"hil.timeout":            kDuration,
	"cloud.url":              kString,
	"cloud.timeout":          kDuration,
	"registries":             kStringList,
	"mcps":                   kAny,
	"private_mcps":           kAny,
	"$schema":                kAny,

	"hil.require_elicitation": kBool,
}

// Error is a configuration problem. Key is empty for whole-file problems.
type Error struct {
	File, Key, Problem string
}

func (e *Error) Error() string {
	if e.Key == "" {
		return fmt.Sprintf("%s: %s", e.File, e.Problem)
	}
	return fmt.Sprintf("%s: key %q: %s", e.File, e.Key, e.Problem)
}

// Load reads workspace/.pml.json, if any, and PML_* environment overrides
// (PML_SANDBOX_TIMEOUT=30s, PML_SANDBOX_MEMORY=1g, ...). env is os.Getenv in
// production.
func Load(workspace string, env func(string) string) (*Config, error) {
	path := filepath.Join(workspace, FileName)
	cfg := &Config{Path: path, Raw: map[string]any{}}
	v := viper.New()
	v.SetEnvPrefix("PML")
	v.SetEnvKeyReplacer(strings.NewReplacer(".", "_"))
	for k, kd := range known {
		if kd != kAny && !strings.HasPrefix(k, "$") {
			_ = v.BindEnv(k)
		}
	}
	// Never through a link, never a FIFO or a huge file: the repository
	// is untrusted and pml may run as root (internal/safefs).
	data, err := safefs.ReadFile(workspace, FileName, safefs.MaxConfig)
	var refused *safefs.Error
	switch {
	case errors.Is(err, os.ErrNotExist):
	case errors.As(err, &refused):
		return nil, err
	case err != nil:
		return nil, &Error{File: path, Problem: fmt.Sprintf("cannot be read: %v", err)}
	default:
		cfg.Exists = true
		if err := checkSyntax(path, data); err != nil {
			return nil, err
		}
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		if err := dec.Decode(&cfg.Raw); err != nil {
			return nil, &Error{File: path, Problem: "the top level must be a JSON object"}
		}
		v.SetConfigType("json")
		if err := v.ReadConfig(bytes.NewReader(data)); err != nil {
			return nil, &Error{File: path, Problem: err.Error()}
		}
		cfg.Warnings = unknownKeys(path, cfg.Raw)
	}

	// Environment values arrive as strings; file values keep their JSON type.
	get := func(key string) (any, string) {
		envName := "PML_" + strings.ToUpper(strings.ReplaceAll(key, ".", "_"))
		if s := env(envName); s != "" {
			return s, envName
		}
		return lookup(cfg.Raw, key), path
	}
	var errs []error
	str := func(key string) string {
		val, src := get(key)
		s, err := asString(val)
		if err != nil {
			errs = append(errs, &Error{File: src, Key: key, Problem: err.Error()})
		}
		return s
	}
	list := func(key string) []string {
		val, src := get(key)
		if s, ok := val.(string); ok && src != path {
			return splitList(s)
		}
		l, err := asStringList(val)
		if err != nil {
			errs = append(errs, &Error{File: src, Key: key, Problem: err.Error()})
		}
		return l
	}
	cfg.Permissions = Permissions{Allow: list("permissions.allow"), Ask: list("permissions.ask"), Deny: list("permissions.deny")}
	cfg.Sandbox.User = str("sandbox.user")
	cfg.Sandbox.ShellImage = str("sandbox.shell_image")
	if cfg.Sandbox.ShellImage == "" {
		cfg.Sandbox.ShellImage = DefaultShellImage
	}
	cfg.Sandbox.Memory = str("sandbox.memory")
	if cfg.Sandbox.Memory != "" {
		if _, err := units.RAMInBytes(cfg.Sandbox.Memory); err != nil {
			_, src := get("sandbox.memory")
			errs = append(errs, &Error{File: src, Key: "sandbox.memory", Problem: fmt.Sprintf("%q is not a size such as \"512m\" or \"1g\"", cfg.Sandbox.Memory)})
		}
	}
	if val, src := get("sandbox.cpus"); val != nil {
		f, err := asNumber(val)
		if err == nil && f <= 0 {
			err = fmt.Errorf("must be greater than 0 (got %v)", f)
		}
		if err != nil {
			errs = append(errs, &Error{File: src, Key: "sandbox.cpus", Problem: err.Error()})
		}
		cfg.Sandbox.CPUs = f
	}
	if val, src := get("sandbox.pids"); val != nil {
		f, err := asNumber(val)
		if err == nil && (f != float64(int64(f)) || f < 1) {
			err = fmt.Errorf("must be a whole number of at least 1 (got %v)", f)
		}
		if err != nil {
			errs = append(errs, &Error{File: src, Key: "sandbox.pids", Problem: err.Error()})
		}
		cfg.Sandbox.Pids = int64(f)
	}
	for _, key := range []string{"sandbox.pool.min", "sandbox.pool.max"} {
		val, src := get(key)
		if val == nil {
			continue
		}
		f, err := asNumber(val)
		if err == nil && (f != float64(int64(f)) || f < 0 || f > 64) {
			err = fmt.Errorf("must be a whole number from 0 to 64 (got %v)", f)
		}
		if err != nil {
			errs = append(errs, &Error{File: src, Key: key, Problem: err.Error()})
		}
		if key == "sandbox.pool.min" {
			cfg.Sandbox.Pool.Min = int(f)
		} else {
			cfg.Sandbox.Pool.Max = int(f)
		}
	}
	if val, src := get("sandbox.max_containers"); val != nil {
		f, err := asNumber(val)
		if err == nil && (f != float64(int64(f)) || f < 2 || f > 1024) {
			// 2: a pml:execute run holds one container while its inner
			// calls need another.
			err = fmt.Errorf("must be a whole number from 2 to 1024 (got %v)", f)
		}
		if err != nil {
			errs = append(errs, &Error{File: src, Key: "sandbox.max_containers", Problem: err.Error()})
		} else {
			cfg.Sandbox.MaxContainers = int(f)
		}
	}
	if p := cfg.Sandbox.Pool; p.Max > 0 && p.Min > p.Max {
		errs = append(errs, &Error{File: path, Key: "sandbox.pool.min", Problem: fmt.Sprintf("must not be larger than sandbox.pool.max (%d > %d)", p.Min, p.Max)})
	}
	for _, key := range []string{"sandbox.timeout", "sandbox.idle_timeout", "hil.timeout", "cloud.timeout"} {
		val, src := get(key)
		if val == nil {
			continue
		}
		d, err := asDuration(val)
		if err != nil {
			errs = append(errs, &Error{File: src, Key: key, Problem: err.Error()})
		}
		switch key {
		case "sandbox.timeout":
			cfg.Sandbox.Timeout = d
		case "sandbox.idle_timeout":
			cfg.Sandbox.IdleTimeout = d
		case "hil.timeout":
			cfg.HIL.Timeout = d
		case "cloud.timeout":
			cfg.Cloud.Timeout = d
		}
	}
	if val, src := get("hil.require_elicitation"); val != nil {
		b, err := asBool(val)
		if err != nil {
			errs = append(errs, &Error{File: src, Key: "hil.require_elicitation", Problem: err.Error()})
		}
		cfg.HIL.RequireElicitation = b
	}
	if cfg.HIL.Timeout == 0 {
		cfg.HIL.Timeout = DefaultHILTimeout
	}
	if cfg.Sandbox.IdleTimeout == 0 {
		cfg.Sandbox.IdleTimeout = DefaultIdleTimeout
	}
	servers, warnings, serr := loadServers(path, cfg.Raw)
	cfg.Servers = servers
	cfg.Warnings = append(cfg.Warnings, warnings...)
	errs = append(errs, serr...)
	cfg.Cloud.URL = strings.TrimRight(str("cloud.url"), "/")
	if cfg.Cloud.URL == "" {
		cfg.Cloud.URL = DefaultCloudURL
	} else if err := checkURL(cfg.Cloud.URL); err != nil {
		_, src := get("cloud.url")
		errs = append(errs, &Error{File: src, Key: "cloud.url", Problem: err.Error()})
	}
	if cfg.Cloud.Timeout == 0 {
		cfg.Cloud.Timeout = DefaultCloudTimeout
	}
	for i, r := range list("registries") {
		r = strings.TrimRight(r, "/")
		if err := checkURL(r); err != nil {
			_, src := get("registries")
			errs = append(errs, &Error{File: src, Key: fmt.Sprintf("registries[%d]", i), Problem: err.Error()})
			continue
		}
		cfg.Registries = append(cfg.Registries, r)
	}
	cfg.RegistriesSet = len(cfg.Registries) > 0
	if len(cfg.Registries) == 0 {
		cfg.Registries = []string{cfg.Cloud.URL}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	return cfg, nil
}

// checkURL accepts an absolute http(s) URL.
func checkURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%q is not an http:// or https:// URL", s)
	}
	return nil
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

// lookup walks a dotted key through nested objects.
func lookup(m map[string]any, key string) any {
	var cur any = m
	for _, part := range strings.Split(key, ".") {
		obj, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur, ok = obj[part]
		if !ok {
			return nil
		}
	}
	return cur
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

func typeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case json.Number, float64:
		return "a number"
	case bool:
		return "true/false"
	case []any:
		return "a list"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}

func asString(v any) (string, error) {
	switch t := v.(type) {
	case nil:
		return "", nil
	case string:
		return t, nil
	}
	return "", fmt.Errorf("must be a string, not %s", typeName(v))
}

func asStringList(v any) ([]string, error) {
	switch t := v.(type) {
	case nil:
		return nil, nil
	case []any:
		out := make([]string, 0, len(t))
		for i, e := range t {
			s, ok := e.(string)
			if !ok {
				return nil, fmt.Errorf("item %d must be a string (a tool name pattern such as \"filesystem:*\"), not %s", i, typeName(e))
			}
			out = append(out, s)
		}
		return out, nil
	}
	return nil, fmt.Errorf("must be a list of strings such as [\"filesystem:*\"], not %s", typeName(v))
}

// splitList reads a comma-separated list from an environment variable.
func splitList(s string) []string {
	var out []string
	for _, e := range strings.Split(s, ",") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}

// asBool accepts a JSON boolean, or true/false/1/0 from the environment.
func asBool(v any) (bool, error) {
	switch t := v.(type) {
	case bool:
		return t, nil
	case string:
		if b, err := strconv.ParseBool(strings.TrimSpace(t)); err == nil {
			return b, nil
		}
		return false, fmt.Errorf("must be true or false, not %q", t)
	}
	return false, fmt.Errorf("must be true or false, not %s", typeName(v))
}

func asNumber(v any) (float64, error) {
	switch t := v.(type) {
	case json.Number:
		return t.Float64()
	case float64:
		return t, nil
	case string: // environment
		f, err := strconv.ParseFloat(t, 64)
		if err != nil {
			return 0, fmt.Errorf("must be a number, not %q", t)
		}
		return f, nil
	}
	return 0, fmt.Errorf("must be a number, not %s", typeName(v))
}

func asDuration(v any) (time.Duration, error) {
	s, ok := v.(string)
	if !ok {
		return 0, fmt.Errorf("must be a duration string such as \"60s\" or \"5m\", not %s", typeName(v))
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%q is not a positive duration such as \"60s\" or \"5m\"", s)
	}
	return d, nil
}

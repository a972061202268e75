// Package policies holds the container security policies pml applies to
// every container it starts. The default is embedded from default.yaml.
//
// A Policy is plain data: the container runtime translates it into its own
// settings (Docker HostConfig today). Capabilities and seccomp are expressed
// with the OCI runtime-spec types so that the same policy can drive another
// runtime later.
package policies

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"time"

	units "github.com/docker/go-units"
	specs "github.com/opencontainers/runtime-spec/specs-go"
	yaml "go.yaml.in/yaml/v3"

	"github.com/pml-dev/pml/internal/lazyre"
)

// runtimeName is what an engine's runtime or a RuntimeClass may be called
// (empty: the default).
var runtimeName = lazyre.New(`^([A-Za-z0-9][A-Za-z0-9._-]{0,62})?$`)

//go:embed default.yaml
var defaultYAML []byte

// Policy is the set of restrictions for one container.
type Policy struct {
	// Network is the network mode: "none" (default) or, only for approved
	// install steps, "bridge".
	Network         string                   `json:"network"`
	ReadOnlyRootfs  bool                     `json:"readOnlyRootfs"`
	NoNewPrivileges bool                     `json:"noNewPrivileges"`
	Tmpfs           map[string]string        `json:"tmpfs,omitempty"`
	Capabilities    *specs.LinuxCapabilities `json:"capabilities,omitempty"`
	// Seccomp nil means the runtime's default profile.
	Seccomp     *specs.LinuxSeccomp `json:"seccomp,omitempty"`
	Resources   Resources           `json:"resources"`
	Timeout     Duration            `json:"timeout"`
	OutputLimit int64               `json:"outputLimit"`
	// Runtime is the engine's OCI runtime the container runs on
	// (sandbox.runtime): "" the engine's default, RuntimeAuto (gVisor
	// where the engine offers it), or a runtime's name ("runsc"). On
	// Kubernetes it is the pod's RuntimeClass.
	Runtime string `json:"runtime,omitempty"`
}

// RuntimeAuto asks for gVisor (RuntimeGVisor) where the engine has it
// registered, else the engine's default runtime.
const RuntimeAuto = "auto"

// RuntimeGVisor is the name gVisor's runtime is registered under
// (/etc/docker/daemon.json "runtimes"; docs/gvisor.md).
const RuntimeGVisor = "runsc"

// Resources are the cgroup limits of a container.
type Resources struct {
	// Memory is a size such as "512m"; swap is never granted on top of it.
	Memory string  `json:"memory"`
	CPUs   float64 `json:"cpus"`
	Pids   int64   `json:"pids"`
}

// MemoryBytes parses Memory ("512m", "1g", "268435456").
func (r Resources) MemoryBytes() (int64, error) {
	if r.Memory == "" {
		return 0, nil
	}
	n, err := units.RAMInBytes(r.Memory)
	if err != nil {
		return 0, fmt.Errorf("memory %q is not a size such as 512m or 1g", r.Memory)
	}
	return n, nil
}

// Duration is a time.Duration written as "60s" in YAML and JSON.
type Duration time.Duration

// UnmarshalJSON accepts "60s"-style strings.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("a duration is a string such as \"60s\" or \"5m\"")
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("%q is not a duration such as \"60s\" or \"5m\"", s)
	}
	*d = Duration(v)
	return nil
}

// MarshalJSON writes the duration as a string.
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(time.Duration(d).String()) }

// Default returns a fresh copy of the embedded default policy.
func Default() Policy {
	p, err := Parse(defaultYAML)
	if err != nil {
		// The default is embedded and covered by tests; failing here is a
		// build defect, not a user error.
		panic("policies: embedded default.yaml is invalid: " + err.Error())
	}
	return p
}

// Parse reads a policy from YAML. Unknown keys are an error: a typo in a
// security policy must never be silently ignored.
func Parse(data []byte) (Policy, error) {
	// The runtime-spec types carry JSON tags only, so go through JSON.
	var tree any
	if err := yaml.Unmarshal(data, &tree); err != nil {
		return Policy{}, fmt.Errorf("policy is not valid YAML: %w", err)
	}
	js, err := json.Marshal(tree)
	if err != nil {
		return Policy{}, fmt.Errorf("policy cannot be represented as JSON: %w", err)
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	var p Policy
	if err := dec.Decode(&p); err != nil {
		return Policy{}, fmt.Errorf("policy: %w", err)
	}
	return p, p.Validate()
}

// Validate checks the values a runtime would otherwise reject late.
func (p Policy) Validate() error {
	switch p.Network {
	case "none", "bridge":
	default:
		return fmt.Errorf("policy: network must be \"none\" or \"bridge\", not %q", p.Network)
	}
	if _, err := p.Resources.MemoryBytes(); err != nil {
		return fmt.Errorf("policy: resources.%w", err)
	}
	if !runtimeName.MatchString(p.Runtime) {
		return fmt.Errorf("policy: runtime %q is not a runtime name (letters, digits, '.', '_', '-')", p.Runtime)
	}
	if p.Resources.CPUs < 0 || p.Resources.Pids < 0 || p.OutputLimit < 0 || p.Timeout < 0 {
		return fmt.Errorf("policy: limits cannot be negative")
	}
	return nil
}

// AddedCapabilities lists the capabilities granted back after dropping all:
// the union of the runtime-spec sets.
func (p Policy) AddedCapabilities() []string {
	if p.Capabilities == nil {
		return nil
	}
	seen := map[string]bool{}
	var out []string
	for _, set := range [][]string{p.Capabilities.Bounding, p.Capabilities.Effective, p.Capabilities.Permitted} {
		for _, c := range set {
			if !seen[c] {
				seen[c] = true
				out = append(out, c)
			}
		}
	}
	return out
}

package config

import (
	"fmt"
	"runtime"
	"strconv"
	"time"

	units "github.com/docker/go-units"

	"github.com/pml-dev/pml/policies"
)

// A floor key is a granting setting with one value: a file may set it
// tighter at once, but a value weaker than its floor (what the person
// trusted, what the team's .pml.json says beneath a .pml.local.json, or
// pml's default) is a grant. Without floors, .pml.local.json (whose keys
// win over .pml.json's) or an edit of a trusted .pml.json could turn off
// hil.require_elicitation or gVisor, or raise a limit, with no trust step.
type floorKey struct {
	key string
	// what says in words what a weaker value does.
	what string
	// get is the setting's value in cfg, as a string; set puts one back.
	get func(*Config) string
	set func(*Config, string)
	// weaker reports whether cur holds less tightly than base.
	weaker func(cur, base string) bool
	// def is pml's default value.
	def string
}

// Floor is, per floor key, the value a trusted content set (what
// internal/trust keeps beside the grants of a record).
type Floor map[string]string

var floorKeys = []floorKey{
	{
		key: "hil.require_elicitation", what: "lets approvals be answered without the client's own dialog (also by the model through continue_workflow)",
		get:    func(c *Config) string { return strconv.FormatBool(c.HIL.RequireElicitation) },
		set:    func(c *Config, v string) { c.HIL.RequireElicitation = v == "true" },
		weaker: func(cur, base string) bool { return cur == "false" && base == "true" },
		def:    "false",
	},
	{
		key: "sandbox.runtime", what: "runs tool containers on a runtime that isolates them less",
		get:    func(c *Config) string { return orDefault(c.Sandbox.Runtime, SandboxRuntimeDefault) },
		set:    func(c *Config, v string) { c.Sandbox.Runtime = v },
		weaker: func(cur, base string) bool { return isolation(cur) < isolation(base) },
		def:    SandboxRuntimeDefault,
	},
	{
		key: "runtime", what: "runs tools on another container runtime",
		get:    func(c *Config) string { return orDefault(c.Runtime, RuntimeDocker) },
		set:    func(c *Config, v string) { c.Runtime = v },
		weaker: func(cur, base string) bool { return cur != base },
		def:    RuntimeDocker,
	},
	{
		key: "kubernetes.namespace", what: "runs tool pods in another Kubernetes namespace",
		get:    func(c *Config) string { return orDefault(c.Kubernetes.Namespace, DefaultKubernetesNamespace) },
		set:    func(c *Config, v string) { c.Kubernetes.Namespace = v },
		weaker: func(cur, base string) bool { return cur != base },
		def:    DefaultKubernetesNamespace,
	},
	{
		key: "sandbox.timeout", what: "lets a tool call run longer",
		get: func(c *Config) string { return c.Sandbox.Timeout.String() },
		set: func(c *Config, v string) { c.Sandbox.Timeout, _ = time.ParseDuration(v) },
		weaker: func(cur, base string) bool {
			return effective(cur, parseDuration, int64(policies.Default().Timeout)) > effective(base, parseDuration, int64(policies.Default().Timeout))
		},
		def: "0s",
	},
	{
		key: "sandbox.memory", what: "gives tool containers more memory",
		get: func(c *Config) string { return c.Sandbox.Memory },
		set: func(c *Config, v string) { c.Sandbox.Memory = v },
		weaker: func(cur, base string) bool {
			return effective(cur, parseSize, defaultMemory()) > effective(base, parseSize, defaultMemory())
		},
		def: "",
	},
	{
		key: "sandbox.cpus", what: "gives tool containers more CPUs",
		get: func(c *Config) string { return strconv.FormatFloat(c.Sandbox.CPUs, 'g', -1, 64) },
		set: func(c *Config, v string) { c.Sandbox.CPUs, _ = strconv.ParseFloat(v, 64) },
		weaker: func(cur, base string) bool {
			d := policies.Default().Resources.CPUs
			return orFloat(cur, d) > orFloat(base, d)
		},
		def: "0",
	},
	{
		key: "sandbox.pids", what: "lets tool containers run more processes",
		get: func(c *Config) string { return strconv.FormatInt(c.Sandbox.Pids, 10) },
		set: func(c *Config, v string) { c.Sandbox.Pids, _ = strconv.ParseInt(v, 10, 64) },
		weaker: func(cur, base string) bool {
			return effective(cur, parseInt, policies.Default().Resources.Pids) > effective(base, parseInt, policies.Default().Resources.Pids)
		},
		def: "0",
	},
	{
		key: "sandbox.max_containers", what: "lets pml run more containers at once",
		get: func(c *Config) string { return strconv.Itoa(c.Sandbox.MaxContainers) },
		set: func(c *Config, v string) { c.Sandbox.MaxContainers, _ = strconv.Atoi(v) },
		weaker: func(cur, base string) bool {
			return effective(cur, parseInt, defaultMaxContainers()) > effective(base, parseInt, defaultMaxContainers())
		},
		def: "0",
	},
}

// isolation ranks sandbox.runtime values: gVisor, gVisor where offered,
// the engine's default.
func isolation(v string) int {
	switch v {
	case SandboxRuntimeGVisor:
		return 2
	case SandboxRuntimeAuto:
		return 1
	}
	return 0
}

func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}

func parseDuration(s string) (int64, error) { d, err := time.ParseDuration(s); return int64(d), err }
func parseSize(s string) (int64, error)     { return units.RAMInBytes(s) }
func parseInt(s string) (int64, error)      { return strconv.ParseInt(s, 10, 64) }

// effective is s as a number, where empty or zero means def (the policy
// default applies).
func effective(s string, parse func(string) (int64, error), def int64) int64 {
	if s == "" {
		return def
	}
	n, err := parse(s)
	if err != nil || n <= 0 {
		return def
	}
	return n
}

func orFloat(s string, def float64) float64 {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f <= 0 {
		return def
	}
	return f
}

func defaultMemory() int64 {
	n, err := policies.Default().Resources.MemoryBytes()
	if err != nil {
		return 0
	}
	return n
}

// defaultMaxContainers is container.DefaultMaxContainers (not imported:
// config stays below the container layer).
func defaultMaxContainers() int64 { return int64(max(4, 2*runtime.NumCPU())) }

// FloorOf is what cfg's files set of every floor key (a record keeps it
// with the grants it trusted).
func FloorOf(cfg *Config) Floor {
	if cfg == nil {
		return nil
	}
	f := Floor{}
	for _, k := range floorKeys {
		if cfg.FromFiles(k.key) {
			f[k.key] = k.get(cfg)
		}
	}
	return f
}

// floorOf returns the value k's setting in cfg may not go below without
// trust, and whether the current value does: the candidates are the
// trusted value, the team's .pml.json value beneath a .pml.local.json that
// overrides it, and pml's default. A value from pml's environment is the
// person's own: never weaker.
func (k floorKey) floorOf(cfg *Config, trusted Floor) (base string, weaker bool) {
	if src := cfg.Source(k.key); src != "" && !cfg.FromFiles(k.key) {
		return "", false
	}
	var cands []string
	if v, ok := trusted[k.key]; ok {
		cands = append(cands, v)
	}
	if cfg.local != nil && cfg.Source(k.key) == cfg.LocalPath {
		if v, ok := teamValue(cfg, k); ok {
			cands = append(cands, v)
		}
	}
	cands = append(cands, k.def)
	cur := k.get(cfg)
	// The tightest candidate: the first in order unless a later one is
	// strictly tighter (unordered keys keep the first: trusted, team,
	// default).
	base = cands[0]
	for _, c := range cands[1:] {
		if k.weaker(base, c) && !k.weaker(c, base) {
			base = c
		}
	}
	for _, c := range cands {
		if k.weaker(cur, c) {
			return base, true
		}
	}
	return base, false
}

// teamValue is what .pml.json alone sets k to.
func teamValue(cfg *Config, k floorKey) (string, bool) {
	v := lookup(cfg.Raw, k.key)
	if v == nil {
		return "", false
	}
	scratch := &Config{}
	for _, s := range table(scratch) {
		if s.key == k.key && s.store != nil {
			s.reset()
			if s.store(v, false) != nil {
				return "", false
			}
			return k.get(scratch), true
		}
	}
	return "", false
}

// floorGrants lists the floor keys cfg sets weaker than their floor.
func floorGrants(cfg *Config, trusted Floor) []Grant {
	var out []Grant
	for _, k := range floorKeys {
		base, weaker := k.floorOf(cfg, trusted)
		if !weaker {
			continue
		}
		cur := k.get(cfg)
		out = append(out, Grant{
			Key:  k.key + "=" + cur,
			Text: fmt.Sprintf("%s (%s %s, not %s)", k.what, k.key, shown(quoteEmpty(cur)), shown(k.baseText(base))),
		})
	}
	return out
}

// holdFloors puts every floor key of c whose weaker value keep refuses
// back to its floor.
func holdFloors(c, cfg *Config, trusted Floor, keep func(Grant) bool) {
	for _, k := range floorKeys {
		base, weaker := k.floorOf(cfg, trusted)
		if weaker && !keep(Grant{Key: k.key + "=" + k.get(cfg)}) {
			k.set(c, base)
		}
	}
}

// baseText says a floor in words: pml's default is named as such.
func (k floorKey) baseText(base string) string {
	switch {
	case base != k.def:
		return quoteEmpty(base)
	case base == "" || base == "0" || base == "0s":
		return "pml's default"
	}
	return "pml's default " + base
}

func quoteEmpty(s string) string {
	if s == "" {
		return "the default"
	}
	return s
}

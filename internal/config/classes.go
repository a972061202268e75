package config

import "sort"

// Class says what a known key can do to the policy pml enforces, and so
// whether a value of it from a policy file needs a person's trust.
type Class int

const (
	// Neutral keys change neither what runs nor how tightly it is held
	// (how long an approval waits, the pool's size, a schema URL).
	Neutral Class = iota + 1
	// Narrowing keys only ever restrict (deny, ask): they apply at once,
	// trusted or not.
	Narrowing
	// Granting keys can give more than pml's defaults or than the value
	// a person trusted (a tool unasked, a host, a server, a raised limit,
	// approvals without the client's dialog): such a value applies only
	// once trusted (GrantsBeyond lists it, Restrict holds it back).
	Granting
)

func (c Class) String() string {
	switch c {
	case Neutral:
		return "neutral"
	case Narrowing:
		return "narrowing"
	case Granting:
		return "granting"
	}
	return "unclassified"
}

// keyClasses classes every key of the known-keys table (keys.go). A key
// added to the table without a class fails TestEveryKnownKeyHasAClass:
// whoever adds it decides whether a file may set it without trust.
var keyClasses = map[string]Class{
	"permissions.allow":             Granting,
	"permissions.ask":               Narrowing,
	"permissions.deny":              Narrowing,
	"sandbox.user":                  Granting,
	"sandbox.shell_image":           Granting,
	"sandbox.runtime":               Granting, // away from gVisor (floors.go)
	"sandbox.memory":                Granting, // raised (floors.go)
	"sandbox.cpus":                  Granting, // raised (floors.go)
	"sandbox.pids":                  Granting, // raised (floors.go)
	"sandbox.pool.min":              Neutral,  // pre-started containers under the same policy
	"sandbox.pool.max":              Neutral,
	"sandbox.max_containers":        Granting, // raised (floors.go)
	"sandbox.timeout":               Granting, // raised (floors.go)
	"sandbox.idle_timeout":          Neutral,
	"sandbox.prestart":              Neutral, // starts only what a call could start unasked
	"sandbox.standby":               Neutral, // a container of a server with no secret, no mount, no network
	"hil.timeout":                   Neutral,
	"cloud.timeout":                 Neutral,
	"hil.require_elicitation":       Granting, // true→false (floors.go); true narrows
	"cloud.url":                     Granting,
	"telemetry.endpoint":            Granting,
	"registries":                    Granting,
	"capabilities":                  Granting, // runs registry code
	"sandbox.network.allow":         Granting,
	"sandbox.network.forward":       Granting,
	"mcps":                          Granting, // each server's whole definition
	"private_mcps":                  Granting,
	"$schema":                       Neutral,
	"sandbox.shared_paths":          Granting,
	"sandbox.mounts":                Granting, // each mount, its target and its mode
	"runtime":                       Granting, // another runtime (floors.go)
	"kubernetes.namespace":          Granting, // another namespace (floors.go)
	"kubernetes.unverified_network": Granting,
}

// ClassOf returns key's class; ok is false for a key pml does not know
// or has not classed.
func ClassOf(key string) (c Class, ok bool) {
	c, ok = keyClasses[key]
	return c, ok
}

// KnownKeys lists the keys of the known-keys table, sorted.
func KnownKeys() []string {
	out := make([]string, 0, len(known))
	for k := range known {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

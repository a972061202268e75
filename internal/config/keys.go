package config

import (
	"errors"
	"fmt"
	"net/url"
	"reflect"
	"strings"
	"time"

	units "github.com/docker/go-units"

	"github.com/pml-dev/pml/internal/keysafe"
	"github.com/pml-dev/pml/internal/termsafe"
	"github.com/pml-dev/pml/internal/toolglob"
)

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

// setting is one row of the known-keys table: a key of .pml.json, the
// kind of value it takes, and how a value reaches the Config.
type setting struct {
	key  string
	kind kind
	// store decodes a value that is present (a string when it comes
	// from the environment), checks it and stores it, or the row's
	// default when the value is empty. nil: the key is read elsewhere.
	store func(v any, fromEnv bool) error
	// reset stores the default: the key is absent.
	reset func()
	// def is the default reset stores (docs/configuration.md shows it).
	def any
}

// table is the known keys of .pml.json, each bound to its field of c.
// Adding a key is adding a row here (and a field to Config); loading,
// the PML_* override, the unknown-key warning and the errors follow.
// The order of the rows is the order errors are reported in.
func table(c *Config) []setting {
	return []setting{
		list("permissions.allow", &c.Permissions.Allow),
		list("permissions.ask", &c.Permissions.Ask),
		list("permissions.deny", &c.Permissions.Deny),
		text("sandbox.user", kString, &c.Sandbox.User, "", nil),
		text("sandbox.shell_image", kString, &c.Sandbox.ShellImage, DefaultShellImage, nil),
		text("sandbox.runtime", kString, &c.Sandbox.Runtime, SandboxRuntimeDefault, checkSandboxRuntime),
		text("sandbox.memory", kSize, &c.Sandbox.Memory, "", checkSize),
		field("sandbox.cpus", kNumber, &c.Sandbox.CPUs, 0, decodeNumber, checkPositive),
		whole("sandbox.pids", &c.Sandbox.Pids, 1, 0),
		whole("sandbox.pool.min", &c.Sandbox.Pool.Min, 0, 64),
		whole("sandbox.pool.max", &c.Sandbox.Pool.Max, 0, 64),
		// At least 2: a pml:execute run holds one container while its
		// inner calls need another.
		whole("sandbox.max_containers", &c.Sandbox.MaxContainers, 2, 1024),
		duration("sandbox.timeout", &c.Sandbox.Timeout, 0),
		duration("sandbox.idle_timeout", &c.Sandbox.IdleTimeout, DefaultIdleTimeout),
		text("sandbox.prestart", kString, &c.Sandbox.Prestart, PrestartOn, checkPrestart),
		text("sandbox.standby", kString, &c.Sandbox.Standby, DefaultStandby, checkStandby),
		duration("hil.timeout", &c.HIL.Timeout, DefaultHILTimeout),
		duration("cloud.timeout", &c.Cloud.Timeout, DefaultCloudTimeout),
		field("hil.require_elicitation", kBool, &c.HIL.RequireElicitation, false, decodeBool, nil),
		baseURL("cloud.url", &c.Cloud.URL, DefaultCloudURL),
		baseURL("telemetry.endpoint", &c.Telemetry.Endpoint, ""),
		field("registries", kStringList, &c.Registries, nil, decodeURLList, nil),
		field("capabilities", kStringList, &c.Capabilities, nil, decodeCapabilityList, nil),
		field("sandbox.network.allow", kStringList, &c.Sandbox.Network.Allow, nil, decodeHostList, nil),
		field("sandbox.network.forward", kAny, &c.Sandbox.Network.Forward, nil, decodeForward, nil),
		owned("mcps"), // servers.go
		owned("private_mcps"),
		owned("$schema"),
		// What a container engine in a VM or on another host can mount
		// (internal/engine); nil: the engine's defaults.
		field("sandbox.shared_paths", kStringList, &c.Sandbox.SharedPaths, nil, decodePathList, nil),
		// Extra host paths in tool containers (mounts.go).
		field("sandbox.mounts", kAny, &c.Sandbox.Mounts, nil, decodeMounts, nil),
		text("runtime", kString, &c.Runtime, RuntimeDocker, checkRuntime),
		text("kubernetes.namespace", kString, &c.Kubernetes.Namespace, DefaultKubernetesNamespace, checkNamespace),
		field("kubernetes.unverified_network", kBool, &c.Kubernetes.UnverifiedNetwork, false, decodeBool, nil),
	}
}

// known maps every key of the table to its kind.
var known = func() map[string]kind {
	m := map[string]kind{}
	for _, s := range table(&Config{}) {
		m[s.key] = s.kind
	}
	return m
}()

// field is a row that decodes a value into dst, checks it when check is
// not nil, and stores def instead of an empty (zero) value.
func field[T any](key string, k kind, dst *T, def T, decode func(v any, fromEnv bool) (T, error), check func(T) error) setting {
	return setting{
		key:  key,
		kind: k,
		store: func(v any, fromEnv bool) error {
			x, err := decode(v, fromEnv)
			if err == nil && check != nil {
				err = check(x)
			}
			if err != nil {
				return err
			}
			if reflect.ValueOf(&x).Elem().IsZero() {
				x = def
			}
			*dst = x
			return nil
		},
		reset: func() { *dst = def },
		def:   def,
	}
}

// text is a string row.
func text(key string, k kind, dst *string, def string, check func(string) error) setting {
	return field(key, k, dst, def, func(v any, _ bool) (string, error) { return asString(v) }, check)
}

// baseURL is an http(s) URL row, kept without its trailing slashes;
// empty means def.
func baseURL(key string, dst *string, def string) setting {
	decode := func(v any, _ bool) (string, error) {
		s, err := asString(v)
		return trimSlash(s), err
	}
	return field(key, kString, dst, def, decode, checkOptionalURL)
}

// list is a list of tool name patterns; the environment gives it comma
// separated.
func list(key string, dst *[]string) setting {
	return field(key, kStringList, dst, nil, decodePatternList, nil)
}

func duration(key string, dst *time.Duration, def time.Duration) setting {
	return field(key, kDuration, dst, def, func(v any, _ bool) (time.Duration, error) { return asDuration(v) }, nil)
}

// whole is a whole-number row from lo to hi (hi 0: no upper bound).
func whole[T int | int64](key string, dst *T, lo, hi int64) setting {
	decode := func(v any, _ bool) (T, error) {
		f, err := asNumber(v)
		if err == nil && (f != float64(int64(f)) || f < float64(lo) || (hi > 0 && f > float64(hi))) {
			if hi == 0 {
				err = fmt.Errorf("must be a whole number of at least %d (got %v)", lo, f)
			} else {
				err = fmt.Errorf("must be a whole number from %d to %d (got %v)", lo, hi, f)
			}
		}
		return T(f), err
	}
	return field(key, kInteger, dst, 0, decode, nil)
}

// owned is a known key another part of config reads (mcps) or that is
// accepted as is ($schema).
func owned(key string) setting { return setting{key: key, kind: kAny} }

func decodeNumber(v any, _ bool) (float64, error) { return asNumber(v) }

func decodeBool(v any, _ bool) (bool, error) { return asBool(v) }

func decodeList(v any, fromEnv bool) ([]string, error) {
	if s, ok := v.(string); ok && fromEnv {
		return splitList(s), nil
	}
	return asStringList(v)
}

// decodePatternList reads a list of tool name patterns and refuses, by
// index, every one pml cannot read (toolglob.Check: empty, or an unclosed
// '['). Such a pattern would match no tool, and a deny that matches
// nothing lets the tool run without a word: the file is refused instead.
func decodePatternList(v any, fromEnv bool) ([]string, error) {
	l, err := decodeList(v, fromEnv)
	if err != nil {
		return nil, err
	}
	var bad itemErrors
	for i, p := range l {
		if err := toolglob.Check(p); err != nil {
			bad = append(bad, itemError{i, err})
		}
	}
	if len(bad) > 0 {
		return nil, bad
	}
	return l, nil
}

// decodeURLList reads registries: each item loses its trailing slashes
// and must be an http(s) URL; the bad ones are all reported, by index.
func decodeURLList(v any, fromEnv bool) ([]string, error) {
	l, err := decodeList(v, fromEnv)
	if err != nil {
		return nil, err
	}
	var out []string
	var bad itemErrors
	for i, r := range l {
		r = trimSlash(r)
		// First: the other checks' messages show the URL.
		if err := checkNoUserInfo(r); err != nil {
			bad = append(bad, itemError{i, err})
			continue
		}
		if err := checkURL(r); err != nil {
			bad = append(bad, itemError{i, err})
			continue
		}
		if err := checkRegistryURL(r); err != nil {
			bad = append(bad, itemError{i, err})
			continue
		}
		out = append(out, r)
	}
	if len(bad) > 0 {
		return nil, bad
	}
	return out, nil
}

// checkNoUserInfo refuses a registry URL with a user name or password
// (https://user:pw@host): pml sends no credentials to a registry (it
// fetches anonymously; PML_API_KEY goes to cloud.url only), and a URL is
// shown wherever pml names the registry (logs, errors, pml trust, the
// cache and the lockfile's messages), so a password in it would be
// printed and stored, not used (issue 50). The message never shows it.
func checkNoUserInfo(s string) error {
	u, err := url.Parse(s)
	if err != nil || u.User == nil {
		return nil
	}
	u.User = nil
	shown := strings.Replace(u.String(), "://", "://…@", 1)
	return fmt.Errorf("%s is written with a user name or password before the host: pml sends no credentials to a registry and would show them wherever it names the registry; remove them: %s", termsafe.Quote(shown, 200), termsafe.Quote(u.String(), 200))
}

// checkRegistryURL refuses plain http to another machine, as keysafe does
// for cloud.url: what pml first fetches from a registry is pinned in the
// lockfile and trusted from then on, so that fetch must not be open to
// anyone on the way.
func checkRegistryURL(s string) error {
	if u, err := url.Parse(s); err == nil && keysafe.Secure(u) {
		return nil
	}
	return fmt.Errorf("%s is plain http to another machine: pml pins what it first fetches from a registry (.pml/mcp.lock), so anyone on the way could choose the code it trusts; use https://, or http:// to 127.0.0.1, [::1] or localhost", termsafe.Quote(s, 200))
}

func trimSlash(s string) string { return strings.TrimRight(s, "/") }

func checkSize(s string) error {
	if s == "" {
		return nil
	}
	if _, err := units.RAMInBytes(s); err != nil {
		return fmt.Errorf("%q is not a size such as \"512m\" or \"1g\"", s)
	}
	return nil
}

func checkPositive(f float64) error {
	if f <= 0 {
		return fmt.Errorf("must be greater than 0 (got %v)", f)
	}
	return nil
}

// checkOptionalURL accepts an http(s) URL, or nothing (the default).
func checkOptionalURL(s string) error {
	if s == "" {
		return nil
	}
	return checkURL(s)
}

// itemError is a problem with item i of a list value.
type itemError struct {
	i   int
	err error
}

// itemErrors are the problems of the items of one list value; each is
// reported under the list's key with its index ("registries[1]").
type itemErrors []itemError

func (e itemErrors) Error() string {
	parts := make([]string, len(e))
	for i, ie := range e {
		parts[i] = fmt.Sprintf("[%d]: %v", ie.i, ie.err)
	}
	return strings.Join(parts, "; ")
}

// keyed turns a row's problem into errors naming the source (the file
// or the environment variable) and the key.
func keyed(src, key string, err error) []error {
	var items itemErrors
	if !errors.As(err, &items) {
		return []error{&Error{File: src, Key: key, Problem: err.Error()}}
	}
	out := make([]error, 0, len(items))
	for _, ie := range items {
		out = append(out, &Error{File: src, Key: fmt.Sprintf("%s[%d]", key, ie.i), Problem: ie.err.Error()})
	}
	return out
}

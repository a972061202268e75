package config

import (
	"strings"
	"testing"
	"time"
)

// keyCase is one key of the table with a value it accepts and one it
// refuses.
type keyCase struct {
	key string
	// good is a .pml.json value the key accepts; check says it arrived.
	good  string
	check func(c *Config) bool
	// bad is a value it refuses; problem is part of the error.
	bad, problem string
}

var keyCases = []keyCase{
	{"permissions.allow", `["filesystem:*"]`, func(c *Config) bool { return c.Permissions.Allow[0] == "filesystem:*" }, `"filesystem:*"`, "must be a list of strings"},
	{"permissions.ask", `["shell:exec"]`, func(c *Config) bool { return c.Permissions.Ask[0] == "shell:exec" }, `[1]`, "item 0 must be a string"},
	{"permissions.deny", `["a:*", "b:c"]`, func(c *Config) bool { return len(c.Permissions.Deny) == 2 }, `{}`, "must be a list of strings"},
	{"sandbox.user", `"1000:1000"`, func(c *Config) bool { return c.Sandbox.User == "1000:1000" }, `1000`, "must be a string, not a number"},
	{"sandbox.runtime", `"runsc"`, func(c *Config) bool { return c.Sandbox.Runtime == SandboxRuntimeGVisor }, `"kata"`, `must be "default", "runsc" or "auto"`},
	{"sandbox.shell_image", `"my/shell:1"`, func(c *Config) bool { return c.Sandbox.ShellImage == "my/shell:1" }, `["x"]`, "must be a string, not a list"},
	{"sandbox.memory", `"512m"`, func(c *Config) bool { return c.Sandbox.Memory == "512m" }, `"lots"`, `"lots" is not a size`},
	{"sandbox.cpus", `1.5`, func(c *Config) bool { return c.Sandbox.CPUs == 1.5 }, `0`, "must be greater than 0"},
	{"sandbox.pids", `128`, func(c *Config) bool { return c.Sandbox.Pids == 128 }, `0`, "a whole number of at least 1"},
	{"sandbox.timeout", `"90s"`, func(c *Config) bool { return c.Sandbox.Timeout == 90*time.Second }, `"-1s"`, "not a positive duration"},
	{"sandbox.idle_timeout", `"1m"`, func(c *Config) bool { return c.Sandbox.IdleTimeout == time.Minute }, `60`, "must be a duration string"},
	{"sandbox.prestart", `"off"`, func(c *Config) bool { return c.Sandbox.Prestart == PrestartOff }, `"later"`, `must be "on" or "off"`},
	{"sandbox.standby", `"off"`, func(c *Config) bool { return c.Sandbox.StandbyWait() == 0 }, `"later"`, `must be "off" or a duration`},
	{"sandbox.pool.min", `2`, func(c *Config) bool { return c.Sandbox.Pool.Min == 2 }, `65`, "from 0 to 64"},
	{"sandbox.pool.max", `8`, func(c *Config) bool { return c.Sandbox.Pool.Max == 8 }, `2.5`, "from 0 to 64"},
	{"sandbox.max_containers", `2`, func(c *Config) bool { return c.Sandbox.MaxContainers == 2 }, `1`, "from 2 to 1024"},
	{"hil.timeout", `"10m"`, func(c *Config) bool { return c.HIL.Timeout == 10*time.Minute }, `"soon"`, `"soon" is not a positive duration`},
	{"hil.require_elicitation", `true`, func(c *Config) bool { return c.HIL.RequireElicitation }, `"yes"`, "must be true or false"},
	{"cloud.url", `"https://cloud.example/"`, func(c *Config) bool { return c.Cloud.URL == "https://cloud.example" }, `"ftp://x"`, "not an http:// or https:// URL"},
	{"telemetry.endpoint", `"http://127.0.0.1:4318/"`, func(c *Config) bool { return c.Telemetry.Endpoint == "http://127.0.0.1:4318" }, `"localhost:4318"`, "not an http:// or https:// URL"},
	{"cloud.timeout", `"5s"`, func(c *Config) bool { return c.Cloud.Timeout == 5*time.Second }, `true`, "must be a duration string"},
	{"sandbox.network.allow", `["api.github.com", "*.npmjs.org:443"]`, func(c *Config) bool {
		return len(c.Sandbox.Network.Rules.Allow) == 3 && c.Sandbox.Network.Rules.Allow[1].Port == 80
	}, `["http://api.github.com"]`, "is a URL; write host or host:port"},
	{"capabilities", `["smartSearch@1.2.0", "db.query"]`, func(c *Config) bool { return len(c.Capabilities) == 2 && c.Capabilities[0] == "smartSearch@1.2.0" }, `["ok", "a b"]`, `has the part "a b"`},
	{"registries", `["https://r.example/"]`, func(c *Config) bool { return c.RegistriesSet && c.Registries[0] == "https://r.example" }, `["https://ok.example", "nope"]`, `"nope" is not an http:// or https:// URL`},
	{"sandbox.shared_paths", `["/Users/me/src/"]`, func(c *Config) bool {
		return len(c.Sandbox.SharedPaths) == 1 && c.Sandbox.SharedPaths[0] == "/Users/me/src"
	}, `["/ok", "src"]`, `"src" is not an absolute path`},
	{"runtime", `"kubernetes"`, func(c *Config) bool { return c.Runtime == RuntimeKubernetes }, `"podman-compose"`, `must be "docker" or "kubernetes"`},
	{"kubernetes.namespace", `"tools"`, func(c *Config) bool { return c.Kubernetes.Namespace == "tools" }, `"Not_A_Name"`, "is not a Kubernetes namespace name"},
	{"kubernetes.unverified_network", `true`, func(c *Config) bool { return c.Kubernetes.UnverifiedNetwork }, `"yes"`, "must be true or false"},
}

// doc nests value under the dotted key: {"a": {"b": value}}.
func doc(key, value string) string {
	parts := strings.Split(key, ".")
	out := value
	for i := len(parts) - 1; i >= 0; i-- {
		out = `{"` + parts[i] + `": ` + out + `}`
	}
	return out
}

func TestEveryKnownKeyHasACase(t *testing.T) {
	covered := map[string]bool{}
	for _, c := range keyCases {
		covered[c.key] = true
	}
	for _, s := range table(&Config{}) {
		if s.kind != kAny && !covered[s.key] {
			t.Errorf("key %q of the table has no case in keyCases: add a valid and an invalid value", s.key)
		}
	}
}

func TestEveryKeyAcceptsAValidValue(t *testing.T) {
	for _, c := range keyCases {
		t.Run(c.key+" accepts "+c.good, func(t *testing.T) {
			cfg, err := Load(write(t, doc(c.key, c.good)), noEnv)
			if err != nil {
				t.Fatal(err)
			}
			if !c.check(cfg) {
				t.Fatalf("the value did not arrive: %+v", cfg)
			}
			if len(cfg.Warnings) != 0 {
				t.Fatalf("a known key was warned about: %v", cfg.Warnings)
			}
		})
	}
}

func TestEveryKeyRefusesAnInvalidValueNamingTheKeyAndTheFile(t *testing.T) {
	for _, c := range keyCases {
		t.Run(c.key+" refuses "+c.bad, func(t *testing.T) {
			_, err := Load(write(t, doc(c.key, c.bad)), noEnv)
			if err == nil {
				t.Fatal("want an error")
			}
			msg := err.Error()
			key := `"` + c.key
			for _, want := range []string{FileName + ":1: key " + key, c.problem} {
				if !strings.Contains(msg, want) {
					t.Errorf("error %q does not say %q", msg, want)
				}
			}
		})
	}
}

func TestAnEnvironmentVariableOverridesEveryKey(t *testing.T) {
	envValue := map[string]string{
		"permissions.allow": "filesystem:*", "permissions.ask": "shell:exec", "permissions.deny": "a:*,b:c",
		"sandbox.user": "1000:1000", "sandbox.shell_image": "my/shell:1", "sandbox.runtime": "runsc", "sandbox.memory": "512m", "sandbox.cpus": "1.5",
		"sandbox.pids": "128", "sandbox.timeout": "90s", "sandbox.idle_timeout": "1m", "sandbox.pool.min": "2",
		"sandbox.pool.max": "8", "sandbox.max_containers": "2", "sandbox.prestart": "off", "sandbox.standby": "off", "hil.timeout": "10m", "hil.require_elicitation": "true",
		"cloud.url": "https://cloud.example/", "cloud.timeout": "5s", "registries": "https://r.example/", "capabilities": "smartSearch@1.2.0,db.query", "telemetry.endpoint": "http://127.0.0.1:4318/",
		"sandbox.shared_paths":  "/Users/me/src/",
		"sandbox.network.allow": "api.github.com,*.npmjs.org:443",
		"runtime":               "kubernetes", "kubernetes.namespace": "tools", "kubernetes.unverified_network": "1",
	}
	for _, c := range keyCases {
		name := "PML_" + strings.ToUpper(strings.ReplaceAll(c.key, ".", "_"))
		t.Run(name+" sets "+c.key, func(t *testing.T) {
			cfg, err := Load(write(t, ""), func(k string) string {
				if k == name {
					return envValue[c.key]
				}
				return ""
			})
			if err != nil {
				t.Fatal(err)
			}
			if !c.check(cfg) {
				t.Fatalf("%s=%q did not arrive: %+v", name, envValue[c.key], cfg)
			}
		})
	}
}

func TestAbsentKeysTakeTheirDefaults(t *testing.T) {
	cfg, err := Load(write(t, `{}`), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		ok   bool
	}{
		{"the shell image is pml's", cfg.Sandbox.ShellImage == DefaultShellImage},
		{"a pooled server idles 5 minutes", cfg.Sandbox.IdleTimeout == DefaultIdleTimeout},
		{"an approval lives 5 minutes", cfg.HIL.Timeout == DefaultHILTimeout},
		{"the cloud is pml's", cfg.Cloud.URL == DefaultCloudURL},
		{"a cloud call gets a minute", cfg.Cloud.Timeout == DefaultCloudTimeout},
		{"the registry is the cloud, not set", len(cfg.Registries) == 1 && cfg.Registries[0] == DefaultCloudURL && !cfg.RegistriesSet},
		{"the container cap is the CPU count's (0)", cfg.Sandbox.MaxContainers == 0},
		{"elicitation is not required", !cfg.HIL.RequireElicitation},
	} {
		t.Run(c.name, func(t *testing.T) {
			if !c.ok {
				t.Fatalf("%+v", cfg)
			}
		})
	}
}

func TestEmptyValuesMeanTheDefault(t *testing.T) {
	cfg, err := Load(write(t, `{"sandbox": {"shell_image": ""}, "cloud": {"url": "/"}, "hil": {"timeout": null}}`), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Sandbox.ShellImage != DefaultShellImage || cfg.Cloud.URL != DefaultCloudURL || cfg.HIL.Timeout != DefaultHILTimeout {
		t.Fatalf("%+v", cfg)
	}
}

func TestRulesAcrossKeys(t *testing.T) {
	for _, c := range []struct {
		name, doc, want string
	}{
		{"a pool minimum above its maximum is refused", `{"sandbox": {"pool": {"min": 5, "max": 2}}}`, `key "sandbox.pool.min": must not be larger than sandbox.pool.max (5 > 2)`},
		{"each bad registry is reported by its index", `{"registries": ["bad", "https://ok.example", "worse"]}`, `key "registries[2]": "worse"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := Load(write(t, c.doc), noEnv)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want %q", err, c.want)
			}
		})
	}
	t.Run("a pool minimum without a maximum is accepted", func(t *testing.T) {
		if _, err := Load(write(t, `{"sandbox": {"pool": {"min": 5}}}`), noEnv); err != nil {
			t.Fatal(err)
		}
	})
}

func TestUnknownKeysAreWarnedAndKept(t *testing.T) {
	cfg, err := Load(write(t, `{"sandbox": {"colour": "blue", "pool": {"size": 1}}, "mystery": 1, "$schema": "x", "mcps": {}}`), noEnv)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{`"mystery"`, `"sandbox.colour"`, `"sandbox.pool.size"`}
	if len(cfg.Warnings) != len(want) {
		t.Fatalf("warnings %v, want one each for %v", cfg.Warnings, want)
	}
	for i, w := range want {
		if !strings.Contains(cfg.Warnings[i], w) || !strings.Contains(cfg.Warnings[i], "kept but ignored") {
			t.Errorf("warning %d = %q, want %s", i, cfg.Warnings[i], w)
		}
	}
}

func TestStandbyWait(t *testing.T) {
	for v, want := range map[string]time.Duration{"": 5 * time.Minute, "off": 0, "0": 0, "30s": 30 * time.Second, "soon": 0, "1h": time.Hour, "61m": 0, "8760h": 0} {
		if got := (Sandbox{Standby: v}).StandbyWait(); got != want {
			t.Errorf("sandbox.standby %q: %v, want %v", v, got, want)
		}
	}
}

package config

import (
	"fmt"
	"sort"
	"strings"
	"time"
)

// Key is one key of .pml.json as docs/configuration.md shows it. The key,
// its type, its default and its variable come from the tables that load
// the file (keys.go, servers.go); the meaning and the example from
// keyDocs (keydocs.go).
type Key struct {
	// Key is the dotted path ("sandbox.timeout"); NAME stands for a
	// server's name ("mcps.NAME.image").
	Key string
	// Type is the kind of value, in words ("duration").
	Type string
	// Default is what applies when the key is absent, in words.
	Default string
	// Env is the PML_* variable that overrides the key, "" for none.
	Env string
	// Meaning says what the key does, in one paragraph of Markdown.
	Meaning string
	// Example is a whole .pml.json that sets the key (a test loads it).
	Example string
	// Section groups keys in the reference ("Permissions").
	Section string
	// Trust says whether a value from a policy file needs the person's
	// trust (classes.go), in words.
	Trust string
}

// trustText is what the reference says of a class.
func trustText(c Class, floor bool) string {
	switch {
	case c == Narrowing:
		return "narrowing: applies at once, trusted or not"
	case c == Neutral:
		return "neutral: applies at once"
	case floor:
		return "granting when weaker than the value you trusted, the team's `.pml.json` or the default: that value applies only after `pml trust` (a tighter one at once)"
	case c == Granting:
		return "granting: a value beyond pml's default applies only after `pml trust`"
	}
	return ""
}

func isFloor(key string) bool {
	for _, f := range floorKeys {
		if f.key == key {
			return true
		}
	}
	return false
}

// serverKey is how the reference writes the keys of a server: NAME is
// its name, and private_mcps's servers have the same keys.
const serverKey = "mcps.NAME."

// Keys lists every key of .pml.json, in the order of its sections, for
// the reference. A key without its row in keyDocs is a Key with an empty
// Meaning: TestEveryKeyIsDocumented fails on it.
func Keys() []Key {
	var out []Key
	for _, s := range table(&Config{}) {
		c, _ := ClassOf(s.key)
		k := Key{Key: s.key, Type: kindName(s.kind), Trust: trustText(c, isFloor(s.key))}
		if s.store != nil {
			k.Env = EnvName(s.key)
			k.Default = defaultText(s.def)
		}
		out = append(out, withDoc(k))
	}
	for _, name := range memberKeys() {
		// A server's keys are its definition, one grant whole.
		out = append(out, withDoc(Key{Key: name, Trust: "granting: part of the server's definition, which applies only after `pml trust`"}))
	}
	order := map[string]int{}
	for i, s := range sections {
		order[s] = i
	}
	sort.SliceStable(out, func(i, j int) bool { return order[out[i].Section] < order[out[j].Section] })
	return out
}

// memberKeys are the keys of a server (serverMembers), of its install
// step (installMembers) and of its network and sandbox objects, as
// mcps.NAME.<member>.
func memberKeys() []string {
	var w []string
	var out []string
	for _, m := range serverMembers(&Server{}, "", "", &w) {
		switch m.name {
		case "install":
			out = append(out, serverKey+"install")
			for _, im := range installMembers(&Install{}) {
				out = append(out, serverKey+"install."+im.name)
			}
		case "network":
			// readNetwork reads these two members.
			out = append(out, serverKey+"network.allow", serverKey+"network.forward")
		case "sandbox":
			// readServerSandbox reads this one member.
			out = append(out, serverKey+"sandbox.runtime")
		default:
			out = append(out, serverKey+m.name)
		}
	}
	return out
}

// withDoc fills k's meaning, example and section from keyDocs, and its
// type and default when the table has none (server members, or a zero
// default whose meaning needs words).
func withDoc(k Key) Key {
	d, ok := keyDocs[k.Key]
	if !ok {
		return k
	}
	k.Meaning, k.Example, k.Section = d.meaning, d.example, d.section
	if k.Type == "" {
		k.Type = d.typ
	}
	if k.Default == "" {
		k.Default = d.def
	}
	return k
}

// kindName is a kind in words; kAny keys say their own type in keyDocs.
func kindName(k kind) string {
	switch k {
	case kString:
		return "string"
	case kStringList:
		return "list of strings"
	case kNumber:
		return "number"
	case kInteger:
		return "whole number"
	case kDuration:
		return `duration ("30s", "5m")`
	case kSize:
		return `size ("512m", "1g")`
	case kBool:
		return "boolean"
	}
	return ""
}

// defaultText is a row's default in words; "" for a zero value, whose
// meaning keyDocs says.
func defaultText(v any) string {
	switch d := v.(type) {
	case nil:
		return ""
	case string:
		if d == "" {
			return ""
		}
		return code(d)
	case time.Duration:
		if d == 0 {
			return ""
		}
		s := d.String()
		// 5m0s reads as 5m.
		if strings.HasSuffix(s, "m0s") {
			s = strings.TrimSuffix(s, "0s")
		}
		if strings.HasSuffix(s, "h0m") {
			s = strings.TrimSuffix(s, "0m")
		}
		return code(s)
	case bool:
		return code(fmt.Sprint(d))
	case map[string]string, []Mount:
		return ""
	case []string:
		if len(d) == 0 {
			return ""
		}
		return code(fmt.Sprintf("%q", d))
	case float64:
		if d == 0 {
			return ""
		}
		return code(fmt.Sprint(d))
	case int, int64:
		if fmt.Sprint(d) == "0" {
			return ""
		}
		return code(fmt.Sprint(d))
	}
	return code(fmt.Sprint(v))
}

// code is s as Markdown code.
func code(s string) string { return "`" + s + "`" }

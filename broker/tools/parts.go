package tools

import (
	"context"

	"github.com/pml-dev/pml/broker/approve"
	"github.com/pml-dev/pml/broker/call"
	"github.com/pml-dev/pml/broker/workflow"
	"github.com/pml-dev/pml/internal/config"
	"github.com/pml-dev/pml/internal/container"
	"github.com/pml-dev/pml/internal/deps"
	"github.com/pml-dev/pml/internal/netallow"
	"github.com/pml-dev/pml/policies"
)

// What the sources (servers, registry, cloud, capabilities, the listing)
// need of the parts around them, each an interface named for what it
// offers; broker's New wires them. The sources never hold the *Broker.

// Sandbox is what the sources need of the containers' side (broker's
// sandbox): the workspace, the engine, and the specs of the containers a
// server and its install run in. Safe for concurrent use.
type Sandbox interface {
	// Workspace is the absolute workspace directory.
	Workspace() string
	// Runtime is the engine every container of this pml goes through
	// (nil: no engine; nothing may start).
	Runtime() container.Runtime
	// User is the uid:gid containers run as.
	User() string
	// Owner labels this pml's containers.
	Owner() container.Owner
	// Labels are the labels of a container with that purpose.
	Labels(purpose string) map[string]string
	// ServerSpec is the container of a pooled server (its image, policy,
	// workspace mounts, its installed dependencies from ds, its network).
	ServerSpec(ds *deps.Store, cfg config.Server) container.Spec
	// ServerPolicy is the project's policy with the server's own runtime.
	ServerPolicy(cfg config.Server) policies.Policy
	// ServerMounts are the project's extra mounts a server gets.
	ServerMounts(cfg config.Server) ([]container.Mount, error)
	// ServerEnv is a server's environment (its env and env_required);
	// an error names what is missing.
	ServerEnv(cfg config.Server) ([]string, error)
	// Supervisor is pml's in-container program on the host, "" when it
	// cannot run in the containers.
	Supervisor(ctx context.Context) string
	// WithEgress gives spec its network through pml's egress proxy id
	// (who and key name it in messages), allowing rules.
	WithEgress(spec *container.Spec, id, who, key string, rules netallow.Rules) error
	// HostValues are the values of the host variables names that tool
	// is sent with (pml's environment, else the workspace's .env; pml's
	// own never) and the names of those not set.
	HostValues(tool string, names []string) (map[string]string, []string)
	// LimitsNote says what limits a container runs under.
	LimitsNote(ctx context.Context) string
}

// Executors make the executors the sources give their tools (broker's:
// they run in containers or in the cloud).
type Executors interface {
	// Server runs the tools of srv: in its pooled container, or in one
	// container per call (lifetime per_call).
	Server(srv *Server) Executor
	// Deno runs the exported functions of deno capabilities (their code
	// is the registry's: Registry.DenoOf).
	Deno() Executor
	// Cloud forwards the cloud's tools and those of registry http
	// entries.
	Cloud() Executor
}

// Permissions are the permissions in force (permit.LivePermissions).
type Permissions interface {
	Decide(tool string) (call.Decision, string)
	// Unlisted decides a call of a tool its server does not list: named
	// false unless an entry names the tool exactly (permit's
	// Permissions.Unlisted; unlisted.go).
	Unlisted(tool string) (d call.Decision, pattern string, named bool)
}

// Approvals write an approval's text for a person (approve.Approver).
type Approvals interface {
	Approval(wf *workflow.Workflow) workflow.Approval
	DependencyApproval(wf *workflow.Workflow, srv config.Server) workflow.Approval
	ServerAccess(cfg config.Server) approve.Access
}

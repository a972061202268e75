package config

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation"
)

// The container runtimes pml can run tools on (key "runtime",
// PML_RUNTIME).
const (
	RuntimeDocker     = "docker"
	RuntimeKubernetes = "kubernetes"
	// DefaultKubernetesNamespace is kubernetes.namespace's default.
	DefaultKubernetesNamespace = "pml"
)

// Kubernetes configures the kubernetes runtime.
type Kubernetes struct {
	// Namespace holds pml's pods and its NetworkPolicy
	// (PML_KUBERNETES_NAMESPACE).
	Namespace string
	// UnverifiedNetwork runs tools even where the network isolation of
	// pml's pods could not be verified (logged on every pod).
	UnverifiedNetwork bool
}

func checkRuntime(s string) error {
	switch s {
	case "", RuntimeDocker, RuntimeKubernetes:
		return nil
	}
	return fmt.Errorf("must be %q or %q (got %q)", RuntimeDocker, RuntimeKubernetes, s)
}

// The values of sandbox.runtime (and of a server's sandbox.runtime): the
// engine's default OCI runtime, gVisor's (registered as "runsc"), or
// gVisor where the engine offers it and the default elsewhere.
const (
	SandboxRuntimeDefault = "default"
	SandboxRuntimeGVisor  = "runsc"
	SandboxRuntimeAuto    = "auto"
)

func checkSandboxRuntime(s string) error {
	switch s {
	case "", SandboxRuntimeDefault, SandboxRuntimeGVisor, SandboxRuntimeAuto:
		return nil
	}
	return fmt.Errorf("must be %q, %q or %q (got %q)", SandboxRuntimeDefault, SandboxRuntimeGVisor, SandboxRuntimeAuto, s)
}

// PolicyRuntime is a sandbox.runtime value as the container policy names
// it (policies.Policy.Runtime): "default" is the engine's, "".
func PolicyRuntime(s string) string {
	if s == SandboxRuntimeDefault {
		return ""
	}
	return s
}

func checkNamespace(s string) error {
	if s == "" {
		return nil
	}
	if errs := validation.IsDNS1123Label(s); len(errs) > 0 {
		return fmt.Errorf("%q is not a Kubernetes namespace name (%s)", s, errs[0])
	}
	return nil
}

// sandbox.prestart's values.
const (
	PrestartOn  = "on"
	PrestartOff = "off"
)

func checkPrestart(s string) error {
	switch s {
	case "", PrestartOn, PrestartOff:
		return nil
	}
	return fmt.Errorf("must be %q or %q (got %q)", PrestartOn, PrestartOff, s)
}

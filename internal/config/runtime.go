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

func checkNamespace(s string) error {
	if s == "" {
		return nil
	}
	if errs := validation.IsDNS1123Label(s); len(errs) > 0 {
		return fmt.Errorf("%q is not a Kubernetes namespace name (%s)", s, errs[0])
	}
	return nil
}

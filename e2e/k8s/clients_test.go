//go:build linux && k8s

package k8s

import (
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	networkingv1client "k8s.io/client-go/kubernetes/typed/networking/v1"
	"k8s.io/client-go/rest"
)

// clients are the two API groups the tests use, with the clientset's
// method names. client-go's whole clientset would compile every API group
// of Kubernetes (about 300 more packages, race-instrumented) for these.
type clients struct {
	core corev1client.CoreV1Interface
	net  networkingv1client.NetworkingV1Interface
}

func (c *clients) CoreV1() corev1client.CoreV1Interface                   { return c.core }
func (c *clients) NetworkingV1() networkingv1client.NetworkingV1Interface { return c.net }

func newClients(cfg *rest.Config) (*clients, error) {
	core, err := corev1client.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	net, err := networkingv1client.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &clients{core: core, net: net}, nil
}

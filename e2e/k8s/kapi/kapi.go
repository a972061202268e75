//go:build k8s

// Package kapi is the Kubernetes API as the test cluster's own programs and
// the Kubernetes e2e tests use it: REST clients for the two API groups they
// touch (core/v1, networking/v1) over a scheme that holds only those two.
//
// Why not client-go's typed clients (kubernetes/typed/core/v1 and the
// like): they import client-go's kubernetes/scheme, which registers every
// API group of Kubernetes (57 packages of k8s.io/api and their clients).
// The enforcer compiles those once and the race-instrumented tests once
// more, about 3 CPU-minutes on a fresh machine, for calls that need two
// groups. pml itself (internal/kubernetes) talks to the API the same way.
//
// It is test infrastructure, not part of pml.
package kapi

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/rest"
)

var (
	scheme = runtime.NewScheme()
	codecs = serializer.NewCodecFactory(scheme)
	// ParameterCodec encodes options (PodExecOptions, ListOptions) as
	// query parameters, for requests built by hand.
	ParameterCodec = runtime.NewParameterCodec(scheme)
)

func init() {
	// AddToScheme only fails on a conflicting registration, which two
	// groups of one release cannot have.
	_ = corev1.AddToScheme(scheme)
	_ = networkingv1.AddToScheme(scheme)
}

// Client holds one REST client per API group.
type Client struct {
	Core       *rest.RESTClient // core/v1, at /api
	Networking *rest.RESTClient // networking.k8s.io/v1, at /apis
}

// New makes the clients for the cluster cfg points at.
func New(cfg *rest.Config) (*Client, error) {
	mk := func(path string, gv schema.GroupVersion) (*rest.RESTClient, error) {
		c := rest.CopyConfig(cfg)
		c.APIPath = path
		c.GroupVersion = &gv
		c.NegotiatedSerializer = codecs.WithoutConversion()
		return rest.RESTClientFor(c)
	}
	core, err := mk("/api", corev1.SchemeGroupVersion)
	if err != nil {
		return nil, err
	}
	netc, err := mk("/apis", networkingv1.SchemeGroupVersion)
	if err != nil {
		return nil, err
	}
	return &Client{Core: core, Networking: netc}, nil
}

// Resource names one kind of object and its API group.
type Resource struct {
	name       string
	networking bool
}

// The resources the tests and the enforcer use.
var (
	Pods            = Resource{name: "pods"}
	Namespaces      = Resource{name: "namespaces"}
	Nodes           = Resource{name: "nodes"}
	Services        = Resource{name: "services"}
	ServiceAccounts = Resource{name: "serviceaccounts"}
	NetworkPolicies = Resource{name: "networkpolicies", networking: true}
)

// Name is the resource's name in API paths ("pods").
func (r Resource) Name() string { return r.name }

// For is the REST client of r's API group.
func (c *Client) For(r Resource) *rest.RESTClient {
	if r.networking {
		return c.Networking
	}
	return c.Core
}

// Get reads object name of r in namespace ns ("" for cluster-scoped
// resources) into into.
func (c *Client) Get(ctx context.Context, r Resource, ns, name string, into runtime.Object) error {
	return c.For(r).Get().NamespaceIfScoped(ns, ns != "").Resource(r.name).Name(name).Do(ctx).Into(into)
}

// List reads every object of r in ns ("" for all or cluster-scoped) into
// into (a *List).
func (c *Client) List(ctx context.Context, r Resource, ns string, into runtime.Object) error {
	return c.For(r).Get().NamespaceIfScoped(ns, ns != "").Resource(r.name).Do(ctx).Into(into)
}

// Create creates obj of r in ns ("" for cluster-scoped) and reads what the
// API server stored into into (which may be obj).
func (c *Client) Create(ctx context.Context, r Resource, ns string, obj, into runtime.Object) error {
	return c.For(r).Post().NamespaceIfScoped(ns, ns != "").Resource(r.name).Body(obj).Do(ctx).Into(into)
}

// Delete deletes object name of r in ns ("" for cluster-scoped).
func (c *Client) Delete(ctx context.Context, r Resource, ns, name string) error {
	return c.For(r).Delete().NamespaceIfScoped(ns, ns != "").Resource(r.name).Name(name).
		Body(&metav1.DeleteOptions{}).Do(ctx).Error()
}

// Package core is core-lite: the small part of the Kubernetes core API that
// the DRA controllers need when draplane runs standalone. It serves the
// k8s.io/api Go structs (core/v1 namespaces, pods, nodes, events;
// coordination.k8s.io/v1 leases; scheduling.k8s.io/v1 PriorityClasses;
// policy/v1 Eviction as the body of the pod eviction subresource) from genericregistry stores, with our own defaulting,
// validation, field selectors and tables. One package per resource holds its
// strategy and storage.
package core

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/registry/generic"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/draplane/draplane/internal/registry/core/event"
	"github.com/draplane/draplane/internal/registry/core/internal/corescheme"
	"github.com/draplane/draplane/internal/registry/core/lease"
	"github.com/draplane/draplane/internal/registry/core/namespace"
	"github.com/draplane/draplane/internal/registry/core/node"
	"github.com/draplane/draplane/internal/registry/core/pod"
	"github.com/draplane/draplane/internal/registry/core/podgroup"
	"github.com/draplane/draplane/internal/registry/core/priorityclass"
)

// AddToScheme registers core/v1 Pod, Namespace, Node, Event (and their
// lists), Binding, policy/v1 Eviction, coordination/v1 Lease and
// scheduling/v1 PriorityClass under their real versions and under
// runtime.APIVersionInternal of the same groups,
// together with the meta option types (metav1.AddToGroupVersion), the
// defaulting funcs and the field label conversions for field selectors.
func AddToScheme(scheme *runtime.Scheme) error {
	return corescheme.AddToScheme(scheme)
}

// NewLegacyStorage returns the storage of the core ("" group, v1) resources,
// keyed as the API installer expects: "namespaces", "namespaces/status",
// "namespaces/finalize", "pods", "pods/status", "pods/binding",
// "pods/eviction", "nodes", "nodes/status", "events".
func NewLegacyStorage(optsGetter generic.RESTOptionsGetter) (map[string]rest.Storage, error) {
	namespaceStorage, err := namespace.NewStorage(optsGetter)
	if err != nil {
		return nil, err
	}
	podStorage, err := pod.NewStorage(optsGetter)
	if err != nil {
		return nil, err
	}
	nodeStorage, err := node.NewStorage(optsGetter)
	if err != nil {
		return nil, err
	}
	eventStorage, err := event.NewREST(optsGetter)
	if err != nil {
		return nil, err
	}
	return map[string]rest.Storage{
		"namespaces":          namespaceStorage.Namespace,
		"namespaces/status":   namespaceStorage.Status,
		"namespaces/finalize": namespaceStorage.Finalize,
		"pods":                podStorage.Pod,
		"pods/status":         podStorage.Status,
		"pods/binding":        podStorage.Binding,
		"pods/eviction":       podStorage.Eviction,
		"nodes":               nodeStorage.Node,
		"nodes/status":        nodeStorage.Status,
		"events":              eventStorage,
	}, nil
}

// NewCoordinationStorage returns the storage of coordination.k8s.io/v1:
// "leases".
func NewCoordinationStorage(optsGetter generic.RESTOptionsGetter) (map[string]rest.Storage, error) {
	leaseStorage, err := lease.NewREST(optsGetter)
	if err != nil {
		return nil, err
	}
	return map[string]rest.Storage{"leases": leaseStorage}, nil
}

// NewSchedulingStorage returns the storage of scheduling.k8s.io/v1:
// "priorityclasses".
func NewSchedulingStorage(optsGetter generic.RESTOptionsGetter) (map[string]rest.Storage, error) {
	priorityClassStorage, err := priorityclass.NewREST(optsGetter)
	if err != nil {
		return nil, err
	}
	return map[string]rest.Storage{"priorityclasses": priorityClassStorage}, nil
}

// NewSchedulingV1beta1Storage returns the storage of
// scheduling.k8s.io/v1beta1: "podgroups" and "podgroups/status".
func NewSchedulingV1beta1Storage(optsGetter generic.RESTOptionsGetter) (map[string]rest.Storage, error) {
	podGroupStorage, err := podgroup.NewStorage(optsGetter)
	if err != nil {
		return nil, err
	}
	return map[string]rest.Storage{"podgroups": podGroupStorage.PodGroup, "podgroups/status": podGroupStorage.Status}, nil
}

package server

import (
	"fmt"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	k8sresourcev1 "k8s.io/api/resource/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"

	"github.com/draplane/draplane/apis/resource/install"
	"github.com/draplane/draplane/apis/resource/upstreamv1"
	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
	resourcev1beta1 "github.com/draplane/draplane/apis/resource/v1beta1"
)

// NewScheme returns the scheme the server decodes, converts and encodes
// with: resource.draplane.dev (internal, v1, v1beta1), resource.k8s.io
// (v1 from k8s.io/api, internal ours) and, with core-lite,
// the core types under their real and internal versions.
func NewScheme(coreLite bool) (*runtime.Scheme, serializer.CodecFactory, error) {
	scheme := runtime.NewScheme()
	install.Install(scheme)
	// resource.k8s.io/v1 over the same internal types; served only where
	// UpstreamResourceAPI says so, registered always.
	if err := upstreamv1.AddToScheme(scheme); err != nil {
		return nil, serializer.CodecFactory{}, fmt.Errorf("register %s: %w", upstreamv1.SchemeGroupVersion, err)
	}
	if err := scheme.SetVersionPriority(upstreamv1.SchemeGroupVersion); err != nil {
		return nil, serializer.CodecFactory{}, err
	}
	if coreLite {
		if err := addCoreLiteToScheme(scheme); err != nil {
			return nil, serializer.CodecFactory{}, fmt.Errorf("register core-lite types: %w", err)
		}
	}
	// Options and status types every group's handlers use.
	metav1.AddToGroupVersion(scheme, schema.GroupVersion{Version: "v1"})
	unversioned := schema.GroupVersion{Group: "", Version: "v1"}
	scheme.AddUnversionedTypes(unversioned,
		&metav1.Status{}, &metav1.APIVersions{}, &metav1.APIGroupList{}, &metav1.APIGroup{}, &metav1.APIResourceList{})
	return scheme, serializer.NewCodecFactory(scheme), nil
}

// newOpenAPIScheme returns a scheme with only the real (served) versions.
// The OpenAPI definition namer derives the group-version-kinds it publishes
// from it; the serving scheme also carries core types under the internal
// version, which would publish `version: __internal`.
func newOpenAPIScheme() (*runtime.Scheme, error) {
	scheme := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		resourcev1.AddToScheme, resourcev1beta1.AddToScheme, k8sresourcev1.AddToScheme,
		corev1.AddToScheme, coordinationv1.AddToScheme, policyv1.AddToScheme, schedulingv1.AddToScheme, schedulingv1beta1.AddToScheme,
		rbacv1.AddToScheme, authorizationv1.AddToScheme, authenticationv1.AddToScheme,
	} {
		if err := add(scheme); err != nil {
			return nil, fmt.Errorf("build OpenAPI scheme: %w", err)
		}
	}
	return scheme, nil
}

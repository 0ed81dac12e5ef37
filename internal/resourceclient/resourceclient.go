// Package resourceclient talks to a cluster's resource.k8s.io/v1 with our
// own generated clientset, informers and listers.
//
// resource.draplane.dev/v1 is upstream's resource.k8s.io/v1 field for
// field, so our types read and write the objects of any kube-apiserver
// that serves resource.k8s.io/v1: a REST client for that group whose
// codecs know our types under upstream's group and version, handed to the
// generated clientset, gives every controller, view and the node agent
// the host cluster's claims, slices, classes and taint rules without a
// second copy of their code for k8s.io/api's types. Only
// ResourcePoolUsage, which is ours alone, is not served there.
package resourceclient

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/rest"

	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
	"github.com/draplane/draplane/generated/clientset/versioned"
	clientscheme "github.com/draplane/draplane/generated/clientset/versioned/scheme"
)

// UpstreamGroupVersion is the API the clients made here talk to.
var UpstreamGroupVersion = schema.GroupVersion{Group: "resource.k8s.io", Version: "v1"}

// upstreamScheme knows our v1 types as resource.k8s.io/v1: what the
// server sends decodes into them, and what a client sends is encoded
// with upstream's apiVersion.
var upstreamScheme = runtime.NewScheme()

var upstreamCodecs = serializer.NewCodecFactory(upstreamScheme)

func init() {
	upstreamScheme.AddKnownTypes(UpstreamGroupVersion,
		&resourcev1.DeviceClass{}, &resourcev1.DeviceClassList{},
		&resourcev1.ResourceClaim{}, &resourcev1.ResourceClaimList{},
		&resourcev1.ResourceClaimTemplate{}, &resourcev1.ResourceClaimTemplateList{},
		&resourcev1.ResourceSlice{}, &resourcev1.ResourceSliceList{},
		&resourcev1.DeviceTaintRule{}, &resourcev1.DeviceTaintRuleList{},
	)
	metav1.AddToGroupVersion(upstreamScheme, UpstreamGroupVersion)
	// The generated typed clients encode list and watch options with the
	// clientset's parameter codec for the REST client's group and version:
	// it must know the options in upstream's group too.
	metav1.AddToGroupVersion(clientscheme.Scheme, UpstreamGroupVersion)
}

// NewForConfig returns a clientset whose ResourceV1() is the resource.k8s.io/v1
// API of the server that config points at. Its ResourceV1beta1() is not
// usable, and neither is ResourceV1().ResourcePoolUsages().
func NewForConfig(config *rest.Config) (versioned.Interface, error) {
	c := rest.CopyConfig(config)
	c.APIPath = "/apis"
	c.GroupVersion = &UpstreamGroupVersion
	c.NegotiatedSerializer = upstreamCodecs.WithoutConversion()
	// JSON: the field names are upstream's by definition, while our
	// protobuf messages are kept equal to upstream's by nothing but care.
	c.ContentType = runtime.ContentTypeJSON
	c.AcceptContentTypes = runtime.ContentTypeJSON
	if c.UserAgent == "" {
		c.UserAgent = rest.DefaultKubernetesUserAgent()
	}
	client, err := rest.RESTClientFor(c)
	if err != nil {
		return nil, fmt.Errorf("REST client for %s: %w", UpstreamGroupVersion, err)
	}
	return versioned.New(client), nil
}

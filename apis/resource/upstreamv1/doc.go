// Package upstreamv1 serves upstream's resource.k8s.io/v1 over the objects
// of resource.draplane.dev: the external types are k8s.io/api's own, and
// this package holds what the server needs around them, the conversions
// to and from our internal types (generated), defaulting and field
// selectors. Standalone servers install it; aggregated ones do not, since
// the host cluster owns resource.k8s.io.
//
// +k8s:conversion-gen=github.com/draplane/draplane/apis/resource
// +k8s:conversion-gen-external-types=k8s.io/api/resource/v1
// +k8s:defaulter-gen=TypeMeta
// +k8s:defaulter-gen-input=k8s.io/api/resource/v1
// +groupName=resource.k8s.io
package upstreamv1

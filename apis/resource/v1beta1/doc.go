// Package v1beta1 is the older served version of resource.draplane.dev: the shapes
// of upstream resource.k8s.io/v1beta1 (flat requests, basic devices).
//
// v1beta1 is deprecated since draplane 0.1: every request to it gets a
// Warning header, and it is served until 0.3 (see "API versions" in
// docs/api.md). The prerelease-lifecycle tags on each kind say so;
// prerelease-lifecycle-gen turns them into the APILifecycle* methods the
// API server reads.
//
// +k8s:deepcopy-gen=package
// +k8s:conversion-gen=github.com/draplane/draplane/apis/resource
// +k8s:defaulter-gen=TypeMeta
// +k8s:openapi-gen=true
// +k8s:protobuf-gen=package
// +k8s:prerelease-lifecycle-gen=true
// +groupName=resource.draplane.dev
package v1beta1

// Package v1 is the storage version of resource.draplane.dev: the shapes of
// upstream resource.k8s.io/v1.
//
// +k8s:deepcopy-gen=package
// +k8s:conversion-gen=github.com/draplane/draplane/apis/resource
// +k8s:defaulter-gen=TypeMeta
// +k8s:openapi-gen=true
// +k8s:protobuf-gen=package
// +groupName=resource.draplane.dev
package v1

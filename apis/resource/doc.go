// Package resource holds the internal (hub) types of resource.draplane.dev.
// Every external version converts to and from these; controllers, the
// allocator and validation work on them.
//
// +k8s:deepcopy-gen=package
// +groupName=resource.draplane.dev
package resource

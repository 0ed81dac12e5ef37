// Package server builds and runs the dra-apiserver API server: a Config
// holds everything resolved from the command's options (certificates,
// storage, embedded etcd, core-lite), a CompletedConfig builds the Server
// with its API groups and hooks, and the Server runs until its context
// ends. The pieces a Config is made of (data dir lock, embedded etcd, PKI,
// scheme, core-lite) are built here too.
package server

const (
	// AdminKubeconfigName is the kubeconfig written into the data dir.
	AdminKubeconfigName = "admin.kubeconfig"
)

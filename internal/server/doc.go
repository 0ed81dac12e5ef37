// Package server builds and runs the dra-apiserver API server: a Config
// holds everything resolved from the command's options (certificates,
// storage, embedded etcd, core-lite), a CompletedConfig builds the Server
// with its API groups and hooks, and the Server runs until its context
// ends. The scheme, OpenAPI and core-lite are built here; the data dir's
// certificates are package server/pki's, the embedded etcd, the stores'
// etcd clients and watch caches and the data dir lock package
// server/etcdstorage's.
package server

//go:build !corelite

package server

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/registry/generic"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/client-go/rest"
)

// coreLiteBuilt is false until registry/core lands: --core-lite is then
// accepted but serves nothing.
const coreLiteBuilt = false

func addCoreLiteToScheme(*runtime.Scheme) error { return nil }

func coreLiteAdmission(*rest.Config) (admission.Interface, genericapiserver.PostStartHookFunc, error) {
	return nil, nil, nil
}

func installCoreLite(*genericapiserver.GenericAPIServer, *runtime.Scheme, generic.RESTOptionsGetter) error {
	return nil
}

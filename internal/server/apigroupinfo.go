package server

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	genericapiserver "k8s.io/apiserver/pkg/server"

	"github.com/draplane/draplane/internal/codec"
)

// newAPIGroupInfo is genericapiserver's default group info with
// typeMetaFactory in its JSON serializers.
func newAPIGroupInfo(group string, scheme *runtime.Scheme, codecs serializer.CodecFactory) genericapiserver.APIGroupInfo {
	info := genericapiserver.NewDefaultAPIGroupInfo(group, scheme, metav1.ParameterCodec, codecs)
	// The default info's codecs are its own, with streaming list encoding.
	if own, ok := info.NegotiatedSerializer.(serializer.CodecFactory); ok {
		info.NegotiatedSerializer = codec.WithTypeMetaFactory(scheme, own, true)
	}
	return info
}

// forgetOpenAPIModels lets go of the OpenAPI models that installing API
// groups leaves in their infos (StaticOpenAPISpec, several MB in all): the
// generic server keeps each info for the destroy function of its storage,
// and nothing reads the models once the managedFields type converter has
// been built from them.
func forgetOpenAPIModels(infos ...*genericapiserver.APIGroupInfo) {
	for _, info := range infos {
		info.StaticOpenAPISpec = nil
	}
}

package server

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	genericapiserver "k8s.io/apiserver/pkg/server"

	"github.com/draplane/draplane/codec"
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

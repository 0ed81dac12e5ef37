package codec

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
)

// metadataAccept asks the API server to answer a request with the
// object's metadata only (meta.k8s.io/v1 PartialObjectMetadata), in
// protobuf or, from a server that has no protobuf for it, in JSON. Every
// Kubernetes API server built on k8s.io/apiserver answers creates and
// updates this way, kube-apiserver included.
const metadataAccept = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1," +
	"application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"

// WriteForMetadata sends obj as the body of req (a POST or PUT of one
// object, with its resource, name and parameters set) and decodes only
// the metadata of the object the server returns: for writers that keep no
// more than its name, UID and resourceVersion, it spares the server
// encoding the whole object and the client decoding it.
//
// A client whose REST client is not a real one (client-go's fake
// clientsets return a nil *rest.RESTClient) writes with full instead,
// which returns the whole object.
func WriteForMetadata[T metav1.Object](ctx context.Context, c rest.Interface, req func(*rest.RESTClient) *rest.Request, obj runtime.Object, full func() (T, error)) (metav1.Object, error) {
	rc, ok := c.(*rest.RESTClient)
	if !ok || rc == nil {
		written, err := full()
		if err != nil {
			return nil, err
		}
		return written, nil
	}
	written := &metav1.PartialObjectMetadata{}
	if err := req(rc).Body(obj).SetHeader("Accept", metadataAccept).Do(ctx).Into(written); err != nil {
		return nil, err
	}
	return written, nil
}

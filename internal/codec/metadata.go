package codec

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kubescheme "k8s.io/client-go/kubernetes/scheme"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
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

// UpdatePodStatus updates the status of pod, as the pods client's
// UpdateStatus does, for a writer that does not read the pod the server
// returns: the server answers with the pod's metadata only
// (WriteForMetadata).
func UpdatePodStatus(ctx context.Context, client corev1client.CoreV1Interface, pod *corev1.Pod, opts metav1.UpdateOptions) error {
	_, err := WriteForMetadata(ctx, client.RESTClient(), func(c *rest.RESTClient) *rest.Request {
		return c.Put().Namespace(pod.Namespace).Resource("pods").Name(pod.Name).SubResource("status").
			VersionedParams(&opts, kubescheme.ParameterCodec)
	}, pod, func() (*corev1.Pod, error) {
		return client.Pods(pod.Namespace).UpdateStatus(ctx, pod, opts)
	})
	return err
}

package app

import (
	"bytes"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
	"github.com/draplane/draplane/server"
)

// TestStorageEncodings: core-lite's objects are stored as protobuf, the
// resource.draplane.dev objects as JSON, and a pod stored as JSON before
// is still read.
func TestStorageEncodings(t *testing.T) {
	scheme, codecs, err := server.NewScheme(true)
	if err != nil {
		t.Fatal(err)
	}
	generic, err := server.NewRecommendedConfig(codecs)
	if err != nil {
		t.Fatal(err)
	}
	o := NewOptions()
	o.Etcd.StorageConfig.Transport.ServerList = []string{"http://127.0.0.1:1"}
	if err := o.applyStorage(generic, scheme, codecs, nil); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}}
	claim := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns"}}
	tests := []struct {
		resource   schema.GroupResource
		obj        runtime.Object
		wantPrefix string
	}{
		{schema.GroupResource{Resource: "pods"}, pod, "k8s\x00"},
		{schema.GroupResource{Resource: "nodes"}, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n"}}, "k8s\x00"},
		{schema.GroupResource{Resource: "events"}, &corev1.Event{ObjectMeta: metav1.ObjectMeta{Name: "e", Namespace: "ns"}}, "k8s\x00"},
		{schema.GroupResource{Group: "resource.draplane.dev", Resource: "resourceclaims"}, claim, "{"},
	}
	for _, tc := range tests {
		t.Run(tc.resource.String(), func(t *testing.T) {
			opts, err := generic.RESTOptionsGetter.GetRESTOptions(tc.resource, tc.obj)
			if err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			if err := opts.StorageConfig.Codec.Encode(tc.obj, &buf); err != nil {
				t.Fatal(err)
			}
			if !bytes.HasPrefix(buf.Bytes(), []byte(tc.wantPrefix)) {
				t.Errorf("stored as %q..., want the prefix %q", buf.Bytes()[:min(buf.Len(), 12)], tc.wantPrefix)
			}
		})
	}

	t.Run("pod stored as JSON before", func(t *testing.T) {
		opts, err := generic.RESTOptionsGetter.GetRESTOptions(schema.GroupResource{Resource: "pods"}, pod)
		if err != nil {
			t.Fatal(err)
		}
		stored := []byte(`{"kind":"Pod","apiVersion":"v1","metadata":{"name":"p","namespace":"ns"}}`)
		got, _, err := opts.StorageConfig.Codec.Decode(stored, nil, nil)
		if err != nil {
			t.Fatalf("decode a pod stored as JSON: %v", err)
		}
		if p, ok := got.(*corev1.Pod); !ok || p.Name != "p" {
			t.Errorf("decoded %#v", got)
		}
	})
}

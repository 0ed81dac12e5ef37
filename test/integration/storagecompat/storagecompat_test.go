// Package storagecompat checks that what a frozen release stored in etcd
// stays readable: every wire fixture of every release under
// apis/resource/testdata is written into etcd as the bytes a server
// stores (the storage version as JSON, as releases up to v0.1.0 stored
// it, and as protobuf, as the server stores it since; at the key the
// registry reads), then read through the API at every version that serves
// its kind. Nothing may be lost on the way. Upstream's own
// resource.k8s.io/v1 fixtures are stored the same way and read back
// through both groups.
package storagecompat

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	clientv3 "go.etcd.io/etcd/client/v3"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	jsonserializer "k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	resourceapi "github.com/draplane/draplane/apis/resource"
	"github.com/draplane/draplane/apis/resource/install"
	"github.com/draplane/draplane/apis/resource/upstreamv1"
	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
	"github.com/draplane/draplane/internal/testing/etcdtest"
	"github.com/draplane/draplane/internal/testing/testenv"
	"github.com/draplane/draplane/test/integration/framework"
)

// storageVersion is the version the server stores every kind in.
var storageVersion = resourcev1.SchemeGroupVersion

// etcdPrefix is the server's key prefix (--etcd-prefix default).
const etcdPrefix = "/registry"

// resourceInfo is a kind's resource and whether it is namespaced.
type resourceInfo struct {
	resource   string
	namespaced bool
}

// resources maps each kind to its resource and whether it is namespaced.
var resources = map[string]resourceInfo{
	"DeviceClass":           {"deviceclasses", false},
	"DeviceTaintRule":       {"devicetaintrules", false},
	"ResourceClaim":         {"resourceclaims", true},
	"ResourceClaimTemplate": {"resourceclaimtemplates", true},
	"ResourceSlice":         {"resourceslices", false},
}

func TestStoredFixturesReadable(t *testing.T) {
	testdata := filepath.Join(testenv.RepoRoot(), "apis", "resource", "testdata")
	releases, err := filepath.Glob(filepath.Join(testdata, "v*"))
	if err != nil {
		t.Fatal(err)
	}
	if len(releases) == 0 {
		t.Fatalf("no frozen release under %s", testdata)
	}
	sort.Strings(releases)

	scheme := k8sruntime.NewScheme()
	install.Install(scheme)
	if err := upstreamv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	codecs := serializer.NewCodecFactory(scheme)
	jsonSerializer := jsonserializer.NewSerializerWithOptions(jsonserializer.DefaultMetaFactory, scheme, scheme, jsonserializer.SerializerOptions{})
	// What a server writes: the object converted to the storage version,
	// encoded as JSON (v0.1.0) or protobuf (--storage-media-type default
	// since).
	storageEncodings := []struct {
		name    string
		encoder k8sruntime.Encoder
	}{
		{"json", codecs.EncoderForVersion(jsonSerializer, storageVersion)},
		{"protobuf", codecs.EncoderForVersion(protobuf.NewSerializer(scheme, scheme), storageVersion)},
	}

	etcdURL := etcdtest.Start(t)
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	defer wg.Wait()
	defer cancel()
	config := framework.StartServerWithEtcd(ctx, t, &wg, false, etcdURL)
	client := kubernetes.NewForConfigOrDie(config).Discovery().RESTClient()
	etcd, err := clientv3.New(clientv3.Config{Endpoints: []string{etcdURL}, DialTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer etcd.Close()

	servedVersions := servedVersionsByKind(ctx, t, client)

	checked := 0
	for _, dir := range releases {
		fixtures, err := filepath.Glob(filepath.Join(dir, "*.json"))
		if err != nil {
			t.Fatal(err)
		}
		for _, fixture := range fixtures {
			if strings.HasSuffix(fixture, ".after_roundtrip.json") {
				continue
			}
			name := filepath.Base(dir) + "/" + filepath.Base(fixture)
			for _, storage := range storageEncodings {
				t.Run(name+"/"+storage.name, func(t *testing.T) {
					data, err := os.ReadFile(fixture)
					if err != nil {
						t.Fatal(err)
					}
					obj, gvk, err := jsonSerializer.Decode(data, nil, nil)
					if err != nil {
						t.Fatalf("decode: %v", err)
					}
					if gvk.Kind == "ResourcePoolUsage" {
						t.Skip("ResourcePoolUsage is computed from other objects, never stored in etcd")
					}
					r, ok := resources[gvk.Kind]
					if !ok {
						t.Fatalf("no resource known for %s", gvk)
					}
					hub, accessor := store(ctx, t, etcd, scheme, storage.encoder, obj, schema.GroupVersion{Group: gvk.Group, Version: k8sruntime.APIVersionInternal}, r)

					versions := servedVersions[gvk.Kind]
					if len(versions) == 0 {
						t.Fatalf("%s is not served at any version", gvk.Kind)
					}
					for _, version := range versions {
						path := "/apis/" + resourceapi.GroupName + "/" + version
						if r.namespaced {
							path += "/namespaces/" + accessor.GetNamespace()
						}
						path += "/" + r.resource + "/" + accessor.GetName()
						got, err := client.Get().AbsPath(path).DoRaw(ctx)
						if err != nil {
							t.Fatalf("GET %s: %v", path, err)
						}

						// What the fixture says at this version: itself at its
						// own version (or what it is pinned to re-encode to);
						// converted through the hub at the others.
						var want []byte
						if version == gvk.Version {
							want = data
							if pinned, err := os.ReadFile(strings.TrimSuffix(fixture, ".json") + ".after_roundtrip.json"); err == nil {
								want = pinned
							}
						} else {
							target := schema.GroupVersion{Group: gvk.Group, Version: version}
							converted, err := scheme.ConvertToVersion(hub, target)
							if err != nil {
								t.Fatalf("convert to %s: %v", target, err)
							}
							var buf bytes.Buffer
							if err := jsonSerializer.Encode(converted, &buf); err != nil {
								t.Fatal(err)
							}
							want = buf.Bytes()
						}
						if diff := cmp.Diff(normalize(t, want), normalize(t, got)); diff != "" {
							t.Errorf("GET %s of the object stored by %s as %s differs from the fixture (-want +got):\n%s", path, name, storage.name, diff)
						}
					}
					checked++
				})
			}
		}
	}
	if checked == 0 {
		t.Fatal("no fixture checked")
	}
	t.Logf("%d fixtures stored (in each encoding) and read back at every served version", checked)

	upstreamFixtures := filepath.Join(testdata, "upstream", "resource.k8s.io")
	checkUpstreamFixtures(ctx, t, client, etcd, scheme, storageEncodings[1].encoder, upstreamFixtures, filepath.Join(testdata, "upstream", "HEAD"))
}

// checkUpstreamFixtures takes upstream's own resource.k8s.io/v1 fixtures
// (k8s.io/api testdata/HEAD, unchanged) the way the server takes a
// resource.k8s.io/v1 request body: decoded as k8s.io/api's types,
// converted to the hub and stored as the server stores. Read back through
// resource.k8s.io/v1 each must be upstream's fixture, and through
// resource.draplane.dev/v1 the same fixture with our group (renamed).
func checkUpstreamFixtures(ctx context.Context, t *testing.T, client rest.Interface, etcd *clientv3.Client, scheme *k8sruntime.Scheme, encoder k8sruntime.Encoder, dir, renamedDir string) {
	files, err := filepath.Glob(filepath.Join(dir, upstreamv1.GroupName+".v1.*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 5 {
		t.Fatalf("%d upstream fixtures in %s, want the 5 kinds of resource.k8s.io/v1", len(files), dir)
	}
	decoder := jsonserializer.NewSerializerWithOptions(jsonserializer.DefaultMetaFactory, scheme, scheme, jsonserializer.SerializerOptions{Strict: true})
	for _, fixture := range files {
		t.Run("upstream/"+filepath.Base(fixture), func(t *testing.T) {
			data, err := os.ReadFile(fixture)
			if err != nil {
				t.Fatal(err)
			}
			obj, gvk, err := decoder.Decode(data, nil, nil)
			if err != nil {
				t.Fatalf("strict decode as %s: %v", upstreamv1.SchemeGroupVersion, err)
			}
			r := resources[gvk.Kind]
			_, accessor := store(ctx, t, etcd, scheme, encoder, obj, upstreamv1.InternalGroupVersion, r)
			namespace := ""
			if r.namespaced {
				namespace = "/namespaces/" + accessor.GetNamespace()
			}
			renamed, err := os.ReadFile(filepath.Join(renamedDir, strings.Replace(filepath.Base(fixture), upstreamv1.GroupName, resourceapi.GroupName, 1)))
			if err != nil {
				t.Fatal(err)
			}
			for _, read := range []struct {
				group string
				want  []byte
			}{
				{upstreamv1.GroupName, data},
				{resourceapi.GroupName, renamed},
			} {
				path := "/apis/" + read.group + "/v1" + namespace + "/" + r.resource + "/" + accessor.GetName()
				got, err := client.Get().AbsPath(path).DoRaw(ctx)
				if err != nil {
					t.Fatalf("GET %s: %v", path, err)
				}
				if diff := cmp.Diff(normalize(t, read.want), normalize(t, got)); diff != "" {
					t.Errorf("GET %s of upstream's fixture differs from it (-want +got):\n%s", path, diff)
				}
			}
		})
	}
}

// store writes obj into etcd as the server stores it: converted to the
// hub of hubVersion, encoded by encoder (the storage version), at the key
// the generic registry uses, <prefix>/<resource>/[<namespace>/]<name>. The
// key is deleted when the test ends. It returns the hub object and obj's
// metadata.
func store(ctx context.Context, t *testing.T, etcd *clientv3.Client, scheme *k8sruntime.Scheme, encoder k8sruntime.Encoder,
	obj k8sruntime.Object, hubVersion schema.GroupVersion, r resourceInfo) (k8sruntime.Object, metav1.Object) {
	t.Helper()
	hub, err := scheme.ConvertToVersion(obj, hubVersion)
	if err != nil {
		t.Fatalf("convert to hub: %v", err)
	}
	var stored bytes.Buffer
	if err := encoder.Encode(hub, &stored); err != nil {
		t.Fatalf("encode for storage: %v", err)
	}
	accessor, err := meta.Accessor(obj)
	if err != nil {
		t.Fatal(err)
	}
	key := etcdPrefix + "/" + r.resource + "/" + accessor.GetName()
	if r.namespaced {
		key = etcdPrefix + "/" + r.resource + "/" + accessor.GetNamespace() + "/" + accessor.GetName()
	}
	if _, err := etcd.Put(ctx, key, stored.String()); err != nil {
		t.Fatalf("put %s: %v", key, err)
	}
	t.Cleanup(func() {
		if _, err := etcd.Delete(context.Background(), key); err != nil {
			t.Errorf("delete %s: %v", key, err)
		}
	})
	return hub, accessor
}

// normalize decodes JSON for comparison, without the resourceVersion:
// the server reports the etcd revision there.
func normalize(t *testing.T, data []byte) map[string]any {
	t.Helper()
	var v map[string]any
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatalf("%v: %s", err, data)
	}
	if metadata, ok := v["metadata"].(map[string]any); ok {
		delete(metadata, "resourceVersion")
	}
	return v
}

// servedVersionsByKind reads discovery: the versions of
// resource.draplane.dev that serve each kind.
func servedVersionsByKind(ctx context.Context, t *testing.T, client rest.Interface) map[string][]string {
	t.Helper()
	var group struct {
		Versions []struct {
			Version string `json:"version"`
		} `json:"versions"`
	}
	raw, err := client.Get().AbsPath("/apis/" + resourceapi.GroupName).DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &group); err != nil {
		t.Fatal(err)
	}
	served := map[string][]string{}
	for _, v := range group.Versions {
		raw, err := client.Get().AbsPath("/apis/" + resourceapi.GroupName + "/" + v.Version).DoRaw(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var list struct {
			Resources []struct {
				Name string `json:"name"`
				Kind string `json:"kind"`
			} `json:"resources"`
		}
		if err := json.Unmarshal(raw, &list); err != nil {
			t.Fatal(err)
		}
		for _, r := range list.Resources {
			if !strings.Contains(r.Name, "/") {
				served[r.Kind] = append(served[r.Kind], v.Version)
			}
		}
	}
	if len(group.Versions) < 2 {
		t.Fatalf("discovery lists versions %v, want at least v1 and v1beta1", group.Versions)
	}
	return served
}

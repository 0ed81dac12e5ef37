package inprocess

import (
	"context"
	"reflect"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/informers"
	coreinformers "k8s.io/client-go/informers/core"
	kubeinternal "k8s.io/client-go/informers/internalinterfaces"
	schedulinginformers "k8s.io/client-go/informers/scheduling"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
	"github.com/draplane/draplane/generated/clientset/versioned"
	resourceinformers "github.com/draplane/draplane/generated/informers/externalversions"
	resourceinternal "github.com/draplane/draplane/generated/informers/externalversions/internalinterfaces"
	resourcegroupinformers "github.com/draplane/draplane/generated/informers/externalversions/resource"
)

// Source lists and watches the server's own storage for the shared
// informers, without the HTTP handlers between them: no request is
// encoded, and no response. Lists and watches of all namespaces only;
// what they return is the informers' to keep and change (the transforms
// drop managedFields), in the resource's version (v1) as a client would
// have decoded it, with an empty TypeMeta.
type Source interface {
	List(ctx context.Context, gvr schema.GroupVersionResource, opts metav1.ListOptions) (runtime.Object, error)
	Watch(ctx context.Context, gvr schema.GroupVersionResource, opts metav1.ListOptions) (watch.Interface, error)
}

// directResources are the types whose shared informers list and watch
// through a Source, and their resources: what the process watches of
// its own server.
var directResources = map[reflect.Type]schema.GroupVersionResource{
	reflect.TypeFor[*resourcev1.DeviceClass]():           resourcev1.SchemeGroupVersion.WithResource("deviceclasses"),
	reflect.TypeFor[*resourcev1.DeviceTaintRule]():       resourcev1.SchemeGroupVersion.WithResource("devicetaintrules"),
	reflect.TypeFor[*resourcev1.ResourceClaim]():         resourcev1.SchemeGroupVersion.WithResource("resourceclaims"),
	reflect.TypeFor[*resourcev1.ResourceClaimTemplate](): resourcev1.SchemeGroupVersion.WithResource("resourceclaimtemplates"),
	reflect.TypeFor[*resourcev1.ResourceSlice]():         resourcev1.SchemeGroupVersion.WithResource("resourceslices"),
	reflect.TypeFor[*corev1.Pod]():                       corev1.SchemeGroupVersion.WithResource("pods"),
	reflect.TypeFor[*corev1.Node]():                      corev1.SchemeGroupVersion.WithResource("nodes"),
	reflect.TypeFor[*corev1.Namespace]():                 corev1.SchemeGroupVersion.WithResource("namespaces"),
	reflect.TypeFor[*schedulingv1.PriorityClass]():       schedulingv1.SchemeGroupVersion.WithResource("priorityclasses"),
}

// DirectResources are the resources the shared informers take from a
// Source when they have one.
func DirectResources() []schema.GroupVersionResource {
	gvrs := make([]schema.GroupVersionResource, 0, len(directResources))
	for _, gvr := range directResources {
		gvrs = append(gvrs, gvr)
	}
	return gvrs
}

// directInformer builds, for an example of a directResources type, the
// informer of that type that lists and watches its resource through src,
// with the index the generated informers have; ok is false for any other
// type.
func directInformer(src Source, example runtime.Object) (build func(resync time.Duration) cache.SharedIndexInformer, ok bool) {
	gvr, ok := directResources[reflect.TypeOf(example)]
	if !ok {
		return nil, false
	}
	return func(resync time.Duration) cache.SharedIndexInformer {
		lw := &directListWatch{}
		lw.ListWithContextFunc = func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			return src.List(ctx, gvr, opts)
		}
		lw.WatchFuncWithContext = func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			return src.Watch(ctx, gvr, opts)
		}
		return cache.NewSharedIndexInformerWithOptions(lw, example, cache.SharedIndexInformerOptions{
			ResyncPeriod: resync,
			Indexers:     cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc},
		})
	}, true
}

// directListWatch lists, then watches from the list's resourceVersion:
// the reflector does not ask it for a watch that streams the initial
// objects (watch-list), whose checks live in the HTTP handlers.
type directListWatch struct{ cache.ListWatch }

func (*directListWatch) IsWatchListSemanticsUnSupported() bool { return true }

// directKube is a kube informer factory whose informers of the
// directResources types list and watch through src. The typed
// informers of core/v1 and scheduling.k8s.io reach them through
// InformerFor; other groups are the factory's own.
type directKube struct {
	informers.SharedInformerFactory
	src Source
}

func (f directKube) InformerFor(obj runtime.Object, newFunc kubeinternal.NewInformerFunc) cache.SharedIndexInformer {
	if direct, ok := directInformer(f.src, obj); ok {
		newFunc = func(_ kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer { return direct(resync) }
	}
	return f.SharedInformerFactory.InformerFor(obj, newFunc)
}

func (f directKube) Core() coreinformers.Interface {
	return coreinformers.New(f, metav1.NamespaceAll, nil)
}

func (f directKube) Scheduling() schedulinginformers.Interface {
	return schedulinginformers.New(f, metav1.NamespaceAll, nil)
}

// directResource is directKube for the resource.draplane.dev factory.
type directResource struct {
	resourceinformers.SharedInformerFactory
	src Source
}

func (f directResource) InformerFor(obj runtime.Object, newFunc resourceinternal.NewInformerFunc) cache.SharedIndexInformer {
	if direct, ok := directInformer(f.src, obj); ok {
		newFunc = func(_ versioned.Interface, resync time.Duration) cache.SharedIndexInformer { return direct(resync) }
	}
	return f.SharedInformerFactory.InformerFor(obj, newFunc)
}

func (f directResource) Resource() resourcegroupinformers.Interface {
	return resourcegroupinformers.New(f, metav1.NamespaceAll, nil)
}

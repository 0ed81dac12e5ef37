// Package inprocess is the plumbing of what runs inside the API server's
// process against it: the client config of in-process clients, the
// informers every watcher in the process shares (the server's views and
// admission, the controllers, the simulator), the informers of one term of
// leadership on top of them, and the simulator's runner with the clients of
// its simulated nodes. It sits below both the server and the controller
// manager, which both use the shared informers.
package inprocess

import (
	"context"
	"fmt"
	"sync"
	"time"
	"unique"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	corev1informers "k8s.io/client-go/informers/core/v1"
	kubeinternal "k8s.io/client-go/informers/internalinterfaces"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	resourceapi "github.com/draplane/draplane/apis/resource"
	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
	"github.com/draplane/draplane/generated/clientset/versioned"
	resourceinformers "github.com/draplane/draplane/generated/informers/externalversions"
	resourceinternal "github.com/draplane/draplane/generated/informers/externalversions/internalinterfaces"
	resourcev1informers "github.com/draplane/draplane/generated/informers/externalversions/resource/v1"
	"github.com/draplane/draplane/internal/resourceclient"
	"github.com/draplane/draplane/internal/sharedmaps"
)

// InProcessConfig is loopback, tuned for clients that run inside the API
// server's own process: responses are not compressed (gzip on a loopback
// connection costs CPU on both ends and saves nothing) and objects travel
// as protobuf, which decodes several times faster than JSON (both the core
// types and resource.draplane.dev have it).
func InProcessConfig(loopback *rest.Config) *rest.Config {
	config := rest.CopyConfig(loopback)
	config.DisableCompression = true
	config.ContentType = runtime.ContentTypeProtobuf
	config.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	return config
}

// Informers are informer factories on the API server's loopback client
// shared by everything in the process that watches it: the controllers
// and the simulator (when they are not leader-elected, so that they live
// as long as the process) and the resourcepools view. Each resource is
// then watched, decoded and cached once instead of once per user.
type Informers struct {
	Kube     informers.SharedInformerFactory
	Resource resourceinformers.SharedInformerFactory
}

// NewInformers returns factories on loopback whose informers drop
// managedFields, which no in-process user reads (the controllers apply
// and update without them; the server keeps the stored ones), except
// pods' and claims' (see GuessPods), and whose ResourceSlices share their devices'
// identical maps (devicemaps). Users ask for their informers, add
// handlers and then call Start; the factories start what was asked for
// so far, so every user may start them. With a Source, the informers of
// the DirectResources list and watch through it instead of loopback.
func NewInformers(loopback *rest.Config, src Source) (*Informers, error) {
	kubeClient, err := kubernetes.NewForConfig(InProcessConfig(loopback))
	if err != nil {
		return nil, fmt.Errorf("shared informers: kube client: %w", err)
	}
	resourceClient, err := versioned.NewForConfig(InProcessConfig(loopback))
	if err != nil {
		return nil, fmt.Errorf("shared informers: resource client: %w", err)
	}
	i := &Informers{
		Kube:     informers.NewSharedInformerFactoryWithOptions(kubeClient, 0, informers.WithTransform(compactKube)),
		Resource: resourceinformers.NewSharedInformerFactoryWithOptions(resourceClient, 0, resourceinformers.WithTransform(compactOwn)),
	}
	if src != nil {
		i.Kube = directKube{SharedInformerFactory: i.Kube, src: src}
		i.Resource = directResource{SharedInformerFactory: i.Resource, src: src}
	}
	return i, nil
}

// GuessPods returns the current pod under a key ("namespace/name") as the
// pods informer of i has it, a copy the caller may change, or nil: the
// guess of the pods store, which has no watch cache, before it updates or
// deletes a pod (etcdstorage.Guesses). Only for informers on the server's
// own pods (NewInformers, whose pods keep their managedFields): a guess is
// written back as it is when its resourceVersion is current. A pod
// without managedFields is no guess, in case a transform dropped them.
func (i *Informers) GuessPods() func(key string) runtime.Object {
	indexer := i.Kube.Core().V1().Pods().Informer().GetIndexer()
	return func(key string) runtime.Object {
		pod, ok := guessable[*corev1.Pod](indexer, key)
		if !ok {
			return nil
		}
		return pod.DeepCopy()
	}
}

// guessable is the object under key in indexer, if it has one of type T
// that has managedFields.
func guessable[T interface {
	comparable
	metav1.Object
}](indexer cache.Indexer, key string) (T, bool) {
	var none T
	obj, ok, err := indexer.GetByKey(key)
	if err != nil || !ok {
		return none, false
	}
	typed, ok := obj.(T)
	if !ok || typed == none || len(typed.GetManagedFields()) == 0 {
		return none, false
	}
	return typed, true
}

// Start starts the informers asked for so far until stop is closed.
func (i *Informers) Start(stop <-chan struct{}) {
	i.Kube.Start(stop)
	i.Resource.Start(stop)
}

// Shutdown waits for the informers to stop (after the stop channel given
// to Start was closed).
func (i *Informers) Shutdown() {
	i.Kube.Shutdown()
	i.Resource.Shutdown()
}

// DropManagedFields is the informers' transform: the cached copy of an
// object has no managedFields. Tombstones and objects without metadata
// pass unchanged. An update sent from such a copy keeps the stored
// managedFields (the server takes the live object's when a request has
// none).
func DropManagedFields(obj any) (any, error) {
	if _, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		return obj, nil
	}
	if accessor, err := meta.Accessor(obj); err == nil && accessor.GetManagedFields() != nil {
		accessor.SetManagedFields(nil)
	}
	return obj, nil
}

// compactKube is the transform of the kube informers on the server's
// own objects: pods keep their managedFields, whose strings are shared
// with other pods' (GuessPods needs the whole pod), everything else
// drops them.
func compactKube(obj any) (any, error) {
	if pod, ok := obj.(*corev1.Pod); ok {
		shareManagedFieldsStrings(pod.ManagedFields)
		return obj, nil
	}
	return DropManagedFields(obj)
}

// shareManagedFieldsStrings makes the strings of entries that most
// entries have in common (manager, operation, apiVersion, fieldsType,
// subresource) the process's one copy of each (package unique); the field
// sets are shared already (fieldsv1string).
func shareManagedFieldsStrings(entries []metav1.ManagedFieldsEntry) {
	for i := range entries {
		e := &entries[i]
		e.Manager = unique.Make(e.Manager).Value()
		e.Operation = metav1.ManagedFieldsOperationType(unique.Make(string(e.Operation)).Value())
		e.APIVersion = unique.Make(e.APIVersion).Value()
		e.FieldsType = unique.Make(e.FieldsType).Value()
		e.Subresource = unique.Make(e.Subresource).Value()
	}
}

// compact is the transform of the resource informers: DropManagedFields,
// and a ResourceSlice's devices share the maps they have in common with
// other slices' (the cached copy is read only, see devicemaps).
func compact(obj any) (any, error) {
	obj, err := DropManagedFields(obj)
	if o, ok := obj.(runtime.Object); ok && err == nil {
		sharedmaps.Share(o)
	}
	return obj, err
}

// compactOwn is the transform of the resource informers on the server's
// own objects: compact, except that ResourceClaims keep their
// managedFields, with the strings most entries share made one copy
// (GuessClaims needs the whole claim).
func compactOwn(obj any) (any, error) {
	if claim, ok := obj.(*resourcev1.ResourceClaim); ok {
		shareManagedFieldsStrings(claim.ManagedFields)
		return obj, nil
	}
	return compact(obj)
}

// GuessClaims is GuessPods for ResourceClaims: the informer's claim under
// a key, converted to the type claims are stored as.
func (i *Informers) GuessClaims() func(key string) runtime.Object {
	indexer := i.Resource.Resource().V1().ResourceClaims().Informer().GetIndexer()
	return func(key string) runtime.Object {
		claim, ok := guessable[*resourcev1.ResourceClaim](indexer, key)
		if !ok {
			return nil
		}
		// The conversion shares what has the same layout in both types:
		// it gets a copy to share.
		stored := &resourceapi.ResourceClaim{}
		if err := resourcev1.Convert_v1_ResourceClaim_To_resource_ResourceClaim(claim.DeepCopy(), stored, nil); err != nil {
			return nil
		}
		return stored
	}
}

// NewHostInformers returns factories on a host cluster: its pods, nodes
// and namespaces, and its resource.k8s.io/v1 objects as our types
// (package resourceclient), with the transforms of NewInformers.
func NewHostInformers(host *rest.Config) (*Informers, error) {
	kubeClient, err := kubernetes.NewForConfig(host)
	if err != nil {
		return nil, fmt.Errorf("host informers: kube client: %w", err)
	}
	resourceClient, err := resourceclient.NewForConfig(host)
	if err != nil {
		return nil, fmt.Errorf("host informers: resource client: %w", err)
	}
	return &Informers{
		Kube:     informers.NewSharedInformerFactoryWithOptions(kubeClient, 0, informers.WithTransform(DropManagedFields)),
		Resource: resourceinformers.NewSharedInformerFactoryWithOptions(resourceClient, 0, resourceinformers.WithTransform(compact)),
	}, nil
}

// SharedInformers creates the process's Informers once, on the first
// loopback config it is given, and hands the same ones to every caller.
// With Host set, they watch that host cluster instead (cluster mode: the
// controllers and the views work on the host's pods, nodes, claims and
// slices).
type SharedInformers struct {
	// Host, when set before the first Get, is the cluster watched.
	Host *rest.Config
	// Direct, when set before the first Get and without Host, is where
	// the informers of the server's own objects list and watch.
	Direct Source

	once      sync.Once
	informers *Informers
	err       error
}

// Get returns the shared Informers, created on loopback (or Host) by the
// first call.
func (s *SharedInformers) Get(loopback *rest.Config) (*Informers, error) {
	s.once.Do(func() {
		if s.Host != nil {
			s.informers, s.err = NewHostInformers(s.Host)
			return
		}
		s.informers, s.err = NewInformers(loopback, s.Direct)
	})
	return s.informers, s.err
}

// OnHost says whether the informers watch a host cluster.
func (s *SharedInformers) OnHost() bool { return s.Host != nil }

// term hands out the shared informers to the controllers or the simulator
// of one term of leadership. What they register on the informers (event
// handlers) is removed when the term ends, so the next term's controllers
// start from a replay of the caches and the last term's are not called
// again; the informers themselves keep running for the process.
type term struct {
	shared *Informers
	stop   <-chan struct{}

	mu            sync.Mutex
	registrations []registration
}

type registration struct {
	informer cache.SharedIndexInformer
	handle   cache.ResourceEventHandlerRegistration
}

// TermInformers are the informers one term of leadership watches
// through: the shared ones where the process has them, else factories of
// the term's own.
type TermInformers struct {
	Core     corev1informers.Interface
	Resource resourcev1informers.Interface

	// Own are the factories of the term itself.
	Own    *Informers
	shared *Informers
	term   *term
	stop   <-chan struct{}
}

// NewTermInformers picks the informers of a term. sharedCore says whether
// core/v1 may come from the shared informers too (not when pods, nodes and
// namespaces are a host cluster's).
func NewTermInformers(kubeClient kubernetes.Interface, resourceClient versioned.Interface, shared *Informers, stop <-chan struct{}, sharedCore bool) *TermInformers {
	ti := &TermInformers{
		Own: &Informers{
			Kube:     informers.NewSharedInformerFactory(kubeClient, 0),
			Resource: resourceinformers.NewSharedInformerFactory(resourceClient, 0),
		},
		shared: shared,
		stop:   stop,
	}
	ti.Core, ti.Resource = ti.Own.Kube.Core().V1(), ti.Own.Resource.Resource().V1()
	if shared != nil {
		ti.term = newTerm(shared, stop)
		ti.Resource = ti.term.Resource()
		if sharedCore {
			ti.Core = ti.term.Core()
		}
	}
	return ti
}

// Start starts the informers asked for so far: the term's own until ctx
// is done, the shared ones until the process's stop.
func (ti *TermInformers) Start(ctx context.Context) {
	ti.Own.Start(ctx.Done())
	if ti.shared != nil {
		ti.shared.Start(ti.stop)
	}
}

// End shuts the term's own informers down and removes what the term
// registered on the shared ones (those are the server's to shut down).
func (ti *TermInformers) End() {
	ti.Own.Shutdown()
	if ti.term != nil {
		ti.term.end()
	}
}

// newTerm returns a term on shared, whose informers run until stop is
// closed (the process's lifetime, not the term's).
func newTerm(shared *Informers, stop <-chan struct{}) *term {
	return &term{shared: shared, stop: stop}
}

// Core is core/v1 of the shared kube factory for this term.
func (t *term) Core() corev1informers.Interface {
	return corev1informers.New(kubeTermFactory{t}, metav1.NamespaceAll, nil)
}

// Resource is resource.draplane.dev/v1 of the shared factory for this term.
func (t *term) Resource() resourcev1informers.Interface {
	return resourcev1informers.New(resourceTermFactory{t}, metav1.NamespaceAll, nil)
}

// end removes what the term registered on the shared informers.
func (t *term) end() {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, r := range t.registrations {
		_ = r.informer.RemoveEventHandler(r.handle)
	}
	t.registrations = nil
}

func (t *term) wrap(informer cache.SharedIndexInformer) cache.SharedIndexInformer {
	return &termInformer{SharedIndexInformer: informer, term: t}
}

func (t *term) record(informer cache.SharedIndexInformer, handle cache.ResourceEventHandlerRegistration, err error) (cache.ResourceEventHandlerRegistration, error) {
	if err == nil {
		t.mu.Lock()
		t.registrations = append(t.registrations, registration{informer: informer, handle: handle})
		t.mu.Unlock()
	}
	return handle, err
}

// kubeTermFactory and resourceTermFactory are the shared factories as the
// typed informer constructors see them: informers wrapped for the term,
// started for the process.
type kubeTermFactory struct{ t *term }

func (f kubeTermFactory) Start(<-chan struct{}) { f.t.shared.Kube.Start(f.t.stop) }
func (f kubeTermFactory) InformerFor(obj runtime.Object, newFunc kubeinternal.NewInformerFunc) cache.SharedIndexInformer {
	return f.t.wrap(f.t.shared.Kube.InformerFor(obj, newFunc))
}
func (f kubeTermFactory) InformerName() *cache.InformerName { return f.t.shared.Kube.InformerName() }

type resourceTermFactory struct{ t *term }

func (f resourceTermFactory) Start(<-chan struct{}) { f.t.shared.Resource.Start(f.t.stop) }
func (f resourceTermFactory) InformerFor(obj runtime.Object, newFunc resourceinternal.NewInformerFunc) cache.SharedIndexInformer {
	return f.t.wrap(f.t.shared.Resource.InformerFor(obj, newFunc))
}
func (f resourceTermFactory) InformerName() *cache.InformerName {
	return f.t.shared.Resource.InformerName()
}

// termInformer is a shared informer as one term sees it: its event
// handlers are recorded for removal, and an index that an earlier term
// already added (the same controller's, under the same name) is kept.
type termInformer struct {
	cache.SharedIndexInformer
	term *term
}

func (i *termInformer) AddEventHandler(handler cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	handle, err := i.SharedIndexInformer.AddEventHandler(handler)
	return i.term.record(i.SharedIndexInformer, handle, err)
}

func (i *termInformer) AddEventHandlerWithResyncPeriod(handler cache.ResourceEventHandler, resync time.Duration) (cache.ResourceEventHandlerRegistration, error) {
	handle, err := i.SharedIndexInformer.AddEventHandlerWithResyncPeriod(handler, resync)
	return i.term.record(i.SharedIndexInformer, handle, err)
}

func (i *termInformer) AddEventHandlerWithOptions(handler cache.ResourceEventHandler, options cache.HandlerOptions) (cache.ResourceEventHandlerRegistration, error) {
	handle, err := i.SharedIndexInformer.AddEventHandlerWithOptions(handler, options)
	return i.term.record(i.SharedIndexInformer, handle, err)
}

func (i *termInformer) AddIndexers(indexers cache.Indexers) error {
	existing := i.GetIndexer().GetIndexers()
	missing := cache.Indexers{}
	for name, index := range indexers {
		if _, ok := existing[name]; !ok {
			missing[name] = index
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return i.SharedIndexInformer.AddIndexers(missing)
}

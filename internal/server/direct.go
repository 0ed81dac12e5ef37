package server

import (
	"context"
	"fmt"
	"slices"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/apiserver/pkg/authentication/user"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/draplane/draplane/internal/inprocess"
)

// directSource serves the shared informers' lists and watches of the
// server's own objects (inprocess.DirectResources) from the stores the
// API handlers serve, without the handlers: over the in-process
// transport each watch event was a deep copy encoded to protobuf by the
// watch handler and decoded again by the informer. Here it is the deep
// copy only, converted to v1 as the conversion functions do (sharing
// what has the same layout). Objects shared with the watch cache (a
// list's items, an event's object) are copied first: the informers'
// transforms change what they are given. The in-process clients are the
// server's loopback identity, which every authorizer allows; the
// requests are made as that user.
type directSource struct {
	mu      sync.RWMutex
	storage map[schema.GroupVersionResource]directStorage
}

var _ inprocess.Source = &directSource{}

// listWatcher is a store the informers list and watch.
type listWatcher interface {
	rest.Lister
	rest.Watcher
}

type directStorage struct {
	store listWatcher
	// kind is the resource's kind in its version, for field selectors.
	kind schema.GroupVersionKind
	// scheme is its group's, which converts its objects.
	scheme *runtime.Scheme
}

var (
	inProcessWatches = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Namespace:      "draplane",
		Subsystem:      "apiserver",
		Name:           "inprocess_watches",
		Help:           "Watches open by the process's shared informers on the stores themselves, past the API handlers (which count theirs in apiserver_longrunning_requests), by group and resource.",
		StabilityLevel: metrics.ALPHA,
	}, []string{"group", "resource"})
	registerInProcessWatches sync.Once
)

// add takes the stores of the direct resources from infos, as they are
// installed.
func (d *directSource) add(infos ...*genericapiserver.APIGroupInfo) error {
	registerInProcessWatches.Do(func() { legacyregistry.MustRegister(inProcessWatches) })
	d.mu.Lock()
	defer d.mu.Unlock()
	want := inprocess.DirectResources()
	for _, info := range infos {
		if len(info.PrioritizedVersions) == 0 {
			continue
		}
		group := info.PrioritizedVersions[0].Group
		for version, resources := range info.VersionedResourcesStorageMap {
			for resource, storage := range resources {
				gvr := schema.GroupVersionResource{Group: group, Version: version, Resource: resource}
				if !slices.Contains(want, gvr) {
					continue
				}
				store, ok := storage.(listWatcher)
				if !ok {
					return fmt.Errorf("storage of %s neither lists nor watches", gvr)
				}
				kinds, _, err := info.Scheme.ObjectKinds(storage.New())
				if err != nil {
					return fmt.Errorf("kind of %s: %w", gvr, err)
				}
				if d.storage == nil {
					d.storage = map[schema.GroupVersionResource]directStorage{}
				}
				d.storage[gvr] = directStorage{store: store, kind: gvr.GroupVersion().WithKind(kinds[0].Kind), scheme: info.Scheme}
			}
		}
	}
	return nil
}

// loopbackUser is who the in-process clients are (the loopback token's
// user).
var loopbackUser = &user.DefaultInfo{Name: user.APIServerUser, Groups: []string{user.SystemPrivilegedGroup}}

// prepare finds gvr's store and converts opts as the list handler does.
func (d *directSource) prepare(ctx context.Context, gvr schema.GroupVersionResource, opts metav1.ListOptions) (context.Context, directStorage, *metainternalversion.ListOptions, error) {
	d.mu.RLock()
	s, ok := d.storage[gvr]
	d.mu.RUnlock()
	if !ok {
		return nil, s, nil, apierrors.NewNotFound(gvr.GroupResource(), "")
	}
	internal := &metainternalversion.ListOptions{}
	if err := metainternalversion.Convert_v1_ListOptions_To_internalversion_ListOptions(&opts, internal, nil); err != nil {
		return nil, s, nil, apierrors.NewBadRequest(err.Error())
	}
	if internal.FieldSelector != nil {
		selector, err := internal.FieldSelector.Transform(func(label, value string) (string, string, error) {
			return s.scheme.ConvertFieldLabel(s.kind, label, value)
		})
		if err != nil {
			return nil, s, nil, apierrors.NewBadRequest(err.Error())
		}
		internal.FieldSelector = selector
	}
	ctx = genericapirequest.WithNamespace(ctx, metav1.NamespaceAll)
	ctx = genericapirequest.WithUser(ctx, loopbackUser)
	return ctx, s, internal, nil
}

// List lists gvr: a copy of the stored objects, in gvr's version.
func (d *directSource) List(ctx context.Context, gvr schema.GroupVersionResource, opts metav1.ListOptions) (runtime.Object, error) {
	ctx, s, internal, err := d.prepare(ctx, gvr, opts)
	if err != nil {
		return nil, err
	}
	list, err := s.store.List(ctx, internal)
	if err != nil {
		return nil, err
	}
	// A list from the watch cache holds shallow copies of its objects.
	out, err := external(s.scheme, list.DeepCopyObject(), gvr.GroupVersion())
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	return out, nil
}

// Watch watches gvr: each event's object a copy in gvr's version.
func (d *directSource) Watch(ctx context.Context, gvr schema.GroupVersionResource, opts metav1.ListOptions) (watch.Interface, error) {
	ctx, s, internal, err := d.prepare(ctx, gvr, opts)
	if err != nil {
		return nil, err
	}
	w, err := s.store.Watch(ctx, internal)
	if err != nil {
		return nil, err
	}
	open := inProcessWatches.WithLabelValues(gvr.Group, gvr.Resource)
	open.Inc()
	cw := newConvertingWatch(ctx, w, open.Dec,
		func(obj runtime.Object) (runtime.Object, error) {
			// The watch cache sends its objects wrapped, to encode them
			// once for all watchers; the wrapper's copy is ours.
			// Other objects are the watcher's own (the cache copies
			// them, and a watch of etcd decodes them for each).
			if cacheable, ok := obj.(runtime.CacheableObject); ok {
				obj = cacheable.GetObject()
			}
			return external(s.scheme, obj, gvr.GroupVersion())
		})
	go cw.loop()
	return cw, nil
}

// external is obj converted to gv in place where the layouts agree, with
// an empty TypeMeta, as a typed client decodes it.
func external(scheme *runtime.Scheme, obj runtime.Object, gv schema.GroupVersion) (runtime.Object, error) {
	out, err := scheme.UnsafeConvertToVersion(obj, gv)
	if err != nil {
		return nil, err
	}
	out.GetObjectKind().SetGroupVersionKind(schema.GroupVersionKind{})
	return out, nil
}

// convertingWatch passes a store's watch events on with their objects
// converted, until the watch ends, Stop or the request's context.
type convertingWatch struct {
	in  watch.Interface
	out chan watch.Event
	// ctx is the request's, ended by Stop too.
	ctx     context.Context
	cancel  context.CancelFunc
	once    sync.Once
	convert func(runtime.Object) (runtime.Object, error)
	// closed is called once the watch ended.
	closed func()
}

// newConvertingWatch passes in's events on, converted, once its loop runs.
func newConvertingWatch(ctx context.Context, in watch.Interface, closed func(), convert func(runtime.Object) (runtime.Object, error)) *convertingWatch {
	ctx, cancel := context.WithCancel(ctx)
	return &convertingWatch{in: in, out: make(chan watch.Event), ctx: ctx, cancel: cancel, convert: convert, closed: closed}
}

func (w *convertingWatch) ResultChan() <-chan watch.Event { return w.out }

func (w *convertingWatch) Stop() {
	w.once.Do(func() {
		w.cancel()
		w.in.Stop()
	})
}

func (w *convertingWatch) loop() {
	defer w.closed()
	defer close(w.out)
	defer w.Stop()
	for {
		var event watch.Event
		select {
		case e, ok := <-w.in.ResultChan():
			if !ok {
				return
			}
			event = e
		case <-w.ctx.Done():
			return
		}
		if event.Type != watch.Error {
			obj, err := w.convert(event.Object)
			if err != nil {
				status := apierrors.NewInternalError(err).ErrStatus
				event = watch.Event{Type: watch.Error, Object: &status}
			} else {
				event.Object = obj
			}
		}
		select {
		case w.out <- event:
		case <-w.ctx.Done():
			return
		}
	}
}

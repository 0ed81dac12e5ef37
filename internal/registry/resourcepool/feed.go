package resourcepool

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/conversion"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"

	resourceapi "github.com/draplane/draplane/apis/resource"
	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
	resourceinformers "github.com/draplane/draplane/generated/informers/externalversions"
)

// Start feeds the tracker from the informers of factory, on the server's
// own API (usually shared with the in-process controllers), until ctx
// ends. It returns once the informers are started; the pools appear as
// their caches fill. Shutting the factory down is its owner's job.
func (r *REST) Start(ctx context.Context, factory resourceinformers.SharedInformerFactory) error {
	logger := klog.FromContext(ctx).WithName("resourcepools")
	ctx = klog.NewContext(ctx, logger)
	v1 := factory.Resource().V1()
	t := r.tracker

	handlers := []struct {
		informer cache.SharedIndexInformer
		handler  cache.ResourceEventHandlerFuncs
	}{
		{v1.ResourceSlices().Informer(), handlerFor(ctx, resourcev1.Convert_v1_ResourceSlice_To_resource_ResourceSlice,
			func(s *resourceapi.ResourceSlice) { t.SetSlice(ctx, s) }, func(s *resourceapi.ResourceSlice) { t.DeleteSlice(ctx, s.Name) })},
		{v1.ResourceClaims().Informer(), handlerFor(ctx, resourcev1.Convert_v1_ResourceClaim_To_resource_ResourceClaim,
			func(c *resourceapi.ResourceClaim) { t.SetClaim(ctx, c) }, func(c *resourceapi.ResourceClaim) { t.DeleteClaim(ctx, c.UID) })},
		{v1.DeviceClasses().Informer(), handlerFor(ctx, resourcev1.Convert_v1_DeviceClass_To_resource_DeviceClass,
			func(c *resourceapi.DeviceClass) { t.SetClass(ctx, c) }, func(c *resourceapi.DeviceClass) { t.DeleteClass(ctx, c.Name) })},
		{v1.DeviceTaintRules().Informer(), handlerFor(ctx, resourcev1.Convert_v1_DeviceTaintRule_To_resource_DeviceTaintRule,
			func(rule *resourceapi.DeviceTaintRule) { t.SetRule(ctx, rule) }, func(rule *resourceapi.DeviceTaintRule) { t.DeleteRule(ctx, rule.Name) })},
	}
	for _, h := range handlers {
		if _, err := h.informer.AddEventHandler(h.handler); err != nil {
			return fmt.Errorf("resourcepools: add event handler: %w", err)
		}
	}
	factory.Start(ctx.Done())
	return nil
}

// handlerFor converts the informer's v1 objects to the hub types the
// tracker counts with. An object that does not convert is logged and
// skipped; validation keeps such objects out of storage.
func handlerFor[V, H any](ctx context.Context, convert func(*V, *H, conversion.Scope) error, set, del func(*H)) cache.ResourceEventHandlerFuncs {
	logger := klog.FromContext(ctx)
	toHub := func(obj any) (*H, bool) {
		if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		v, ok := obj.(*V)
		if !ok {
			return nil, false
		}
		h := new(H)
		if err := convert(v, h, nil); err != nil {
			logger.Error(err, "Cannot convert object for resourcepools", "type", fmt.Sprintf("%T", v))
			return nil, false
		}
		return h, true
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if h, ok := toHub(obj); ok {
				set(h)
			}
		},
		UpdateFunc: func(_, obj any) {
			if h, ok := toHub(obj); ok {
				set(h)
			}
		},
		DeleteFunc: func(obj any) {
			if h, ok := toHub(obj); ok {
				del(h)
			}
		},
	}
}

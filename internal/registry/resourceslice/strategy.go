// Package resourceslice holds the behaviour (strategy) and the storage of
// ResourceSlices: cluster-scoped objects a driver publishes to describe the
// devices of one pool.
package resourceslice

import (
	"context"
	"fmt"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/registry/generic"
	"k8s.io/apiserver/pkg/storage"
	"k8s.io/apiserver/pkg/storage/names"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	resourceapi "github.com/draplane/draplane/apis/resource"
	"github.com/draplane/draplane/apis/resource/validation"
)

// sliceStrategy implements create, update and delete behaviour.
type sliceStrategy struct {
	runtime.ObjectTyper
	names.NameGenerator
}

// NewStrategy returns the strategy for ResourceSlices; typer must know the
// internal and external types of resource.draplane.dev.
func NewStrategy(typer runtime.ObjectTyper) sliceStrategy {
	return sliceStrategy{ObjectTyper: typer, NameGenerator: names.SimpleNameGenerator}
}

func (sliceStrategy) NamespaceScoped() bool { return false }

// PrepareForCreate starts the generation at 1, drops the fields of feature
// gates that are off and stamps taints that came without a time.
func (sliceStrategy) PrepareForCreate(ctx context.Context, obj runtime.Object) {
	slice := obj.(*resourceapi.ResourceSlice)
	slice.Generation = 1
	dropDisabledFields(slice, nil)
	stampTaints(slice, nil, metav1.Now().Rfc3339Copy())
}

func (sliceStrategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	return validation.ValidateResourceSlice(obj.(*resourceapi.ResourceSlice))
}

func (sliceStrategy) WarningsOnCreate(ctx context.Context, obj runtime.Object) []string { return nil }

func (sliceStrategy) Canonicalize(obj runtime.Object) {}

func (sliceStrategy) AllowCreateOnUpdate(ctx context.Context) bool { return false }

// PrepareForUpdate drops the fields of feature gates that are off (unless
// the stored slice uses them) and bumps the generation when the spec
// changed, so that consumers can tell a new revision of the pool's devices
// from a metadata change.
func (sliceStrategy) PrepareForUpdate(ctx context.Context, obj, old runtime.Object) {
	slice := obj.(*resourceapi.ResourceSlice)
	oldSlice := old.(*resourceapi.ResourceSlice)
	dropDisabledFields(slice, oldSlice)
	stampTaints(slice, oldSlice, metav1.Now().Rfc3339Copy())
	// A quantity beyond int64 would make the comparison run for minutes;
	// validation refuses the update anyway.
	if len(validation.ValidateQuantityMagnitudes(slice, nil)) == 0 && !apiequality.Semantic.DeepEqual(slice.Spec, oldSlice.Spec) {
		slice.Generation = oldSlice.Generation + 1
	}
}

func (sliceStrategy) ValidateUpdate(ctx context.Context, obj, old runtime.Object) field.ErrorList {
	return validation.ValidateResourceSliceUpdate(obj.(*resourceapi.ResourceSlice), old.(*resourceapi.ResourceSlice))
}

func (sliceStrategy) WarningsOnUpdate(ctx context.Context, obj, old runtime.Object) []string {
	return nil
}

func (sliceStrategy) AllowUnconditionalUpdate(ctx context.Context) bool { return true }

// GetResetFields: a ResourceSlice has no status, nothing is reset.
func (sliceStrategy) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set { return nil }

// stampTaints sets timeAdded on device taints that have none: to the time of
// the same taint (key, value, effect) on the same device in old if there is
// one, otherwise to now.
func stampTaints(slice, old *resourceapi.ResourceSlice, now metav1.Time) {
	type taintKey struct {
		device, key, value string
		effect             resourceapi.DeviceTaintEffect
	}
	previous := map[taintKey]*metav1.Time{}
	if old != nil {
		for _, device := range old.Spec.Devices {
			for _, taint := range device.Taints {
				previous[taintKey{device.Name, taint.Key, taint.Value, taint.Effect}] = taint.TimeAdded
			}
		}
	}
	for i := range slice.Spec.Devices {
		device := &slice.Spec.Devices[i]
		for j := range device.Taints {
			taint := &device.Taints[j]
			if taint.TimeAdded != nil {
				continue
			}
			if t := previous[taintKey{device.Name, taint.Key, taint.Value, taint.Effect}]; t != nil {
				taint.TimeAdded = t.DeepCopy()
				continue
			}
			stamp := now
			taint.TimeAdded = &stamp
		}
	}
}

// GetAttrs returns the labels and the selectable fields of a ResourceSlice.
func GetAttrs(obj runtime.Object) (labels.Set, fields.Set, error) {
	slice, ok := obj.(*resourceapi.ResourceSlice)
	if !ok {
		return nil, nil, fmt.Errorf("not a ResourceSlice: %T", obj)
	}
	return labels.Set(slice.Labels), toSelectableFields(slice), nil
}

// Match returns a predicate for the label and field selectors of a list or
// watch.
func Match(label labels.Selector, field fields.Selector) storage.SelectionPredicate {
	return storage.SelectionPredicate{
		Label:       label,
		Field:       field,
		GetAttrs:    GetAttrs,
		IndexFields: []string{resourceapi.ResourceSliceSelectorNodeName},
	}
}

func toSelectableFields(slice *resourceapi.ResourceSlice) fields.Set {
	set := generic.ObjectMetaFieldsSet(&slice.ObjectMeta, false)
	nodeName := ""
	if slice.Spec.NodeName != nil {
		nodeName = *slice.Spec.NodeName
	}
	set[resourceapi.ResourceSliceSelectorNodeName] = nodeName
	set[resourceapi.ResourceSliceSelectorDriver] = slice.Spec.Driver
	set[resourceapi.ResourceSliceSelectorPoolName] = slice.Spec.Pool.Name
	return set
}

// nodeNameTriggerFunc lets the watch cache hand a watch for one node only
// the slices of that node.
func nodeNameTriggerFunc(obj runtime.Object) string {
	slice, ok := obj.(*resourceapi.ResourceSlice)
	if !ok || slice.Spec.NodeName == nil {
		return ""
	}
	return *slice.Spec.NodeName
}

// indexers index the watch cache by spec.nodeName, the selector every
// node-local driver uses.
func indexers() *cache.Indexers {
	return &cache.Indexers{
		storage.FieldIndex(resourceapi.ResourceSliceSelectorNodeName): func(obj interface{}) ([]string, error) {
			slice, ok := obj.(*resourceapi.ResourceSlice)
			if !ok {
				return nil, fmt.Errorf("not a ResourceSlice: %T", obj)
			}
			if slice.Spec.NodeName == nil {
				return []string{""}, nil
			}
			return []string{*slice.Spec.NodeName}, nil
		},
	}
}

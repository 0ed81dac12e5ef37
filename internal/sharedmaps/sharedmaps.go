// Package sharedmaps lets ResourceSlices that are kept for a long time
// share the attribute and capacity maps their devices have in common.
//
// Each decoded device has two maps of its own: its attributes and its
// capacity. Even a small Go map takes a group of eight slots, so the maps
// are most of a decoded device with a few attributes and one capacity.
// Devices of the same
// model usually have the same capacity, and devices without a per-device
// attribute (a serial number, a bus address) the same attributes, so a
// cluster's slices repeat a few maps many times. The watch cache and the
// in-process informers each keep a decoded copy of every slice; Share
// points the devices of such a copy at one map per distinct content.
//
// Sharing is safe only where nothing writes to the maps: objects held by
// a watch cache or an informer cache, which every reader treats as read
// only (a writer deep-copies first, which copies the maps). Never share
// the maps of an object a request or a controller is about to change.
package sharedmaps

import (
	"slices"
	"strconv"
	"sync"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"

	resourceapi "github.com/draplane/draplane/apis/resource"
	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
)

// maxShared bounds each table of shared maps. A full table starts over:
// maps no slice holds any more are not kept for ever, and devices whose
// maps are all different (a serial number among the attributes) cost at
// most this many entries. Devices that took a map from the old table keep
// it; the next device with the same content gets one from the new table.
const maxShared = 4096

// table holds one map per distinct content, under a key that encodes the
// content (see attributesKey, capacityKey).
type table[M any] struct {
	mu   sync.Mutex
	maps map[string]M
}

// shared returns the map kept under key, or keeps m under it. key may be
// a scratch buffer: it is copied when kept.
func (t *table[M]) shared(key []byte, m M) M {
	t.mu.Lock()
	defer t.mu.Unlock()
	if kept, ok := t.maps[string(key)]; ok {
		return kept
	}
	if t.maps == nil || len(t.maps) >= maxShared {
		t.maps = make(map[string]M)
	}
	t.maps[string(key)] = m
	return m
}

var (
	attributes   table[map[resourceapi.QualifiedName]resourceapi.DeviceAttribute]
	capacities   table[map[resourceapi.QualifiedName]resourceapi.DeviceCapacity]
	attributesV1 table[map[resourcev1.QualifiedName]resourcev1.DeviceAttribute]
	capacitiesV1 table[map[resourcev1.QualifiedName]resourcev1.DeviceCapacity]
)

// Share makes the devices of a ResourceSlice, internal or
// resource.draplane.dev/v1, use shared maps; other objects pass unchanged.
// See the package comment for when it may be called.
func Share(obj runtime.Object) {
	switch slice := obj.(type) {
	case *resourceapi.ResourceSlice:
		if len(slice.Spec.Devices) == 0 {
			return
		}
		k := keys.Get().(*keyBuffer)
		defer k.release()
		for i := range slice.Spec.Devices {
			d := &slice.Spec.Devices[i]
			d.Attributes = share(&attributes, d.Attributes, attributesKey(k, d.Attributes, internalAttribute))
			d.Capacity = share(&capacities, d.Capacity, capacityKey(k, d.Capacity, internalCapacity))
		}
	case *resourcev1.ResourceSlice:
		if len(slice.Spec.Devices) == 0 {
			return
		}
		k := keys.Get().(*keyBuffer)
		defer k.release()
		for i := range slice.Spec.Devices {
			d := &slice.Spec.Devices[i]
			d.Attributes = share(&attributesV1, d.Attributes, attributesKey(k, d.Attributes, v1Attribute))
			d.Capacity = share(&capacitiesV1, d.Capacity, capacityKey(k, d.Capacity, v1Capacity))
		}
	}
}

// keyBuffer is where a map's key is written, and its names sorted: one
// per Share call, from keys, so that a key costs no allocation unless
// its map is kept.
type keyBuffer struct {
	key   []byte
	names []string
}

var keys = sync.Pool{New: func() any { return &keyBuffer{key: make([]byte, 0, 256), names: make([]string, 0, 16)} }}

// release puts b back into keys, holding no names: they point into a
// slice that may be gone by the time b is used again.
func (b *keyBuffer) release() {
	clear(b.names[:cap(b.names)])
	b.names = b.names[:0]
	keys.Put(b)
}

// share returns the shared map for m's content, or m itself when its key
// is nil (nothing to share, or content that is not shared).
func share[M ~map[K]V, K comparable, V any](t *table[M], m M, key []byte) M {
	if key == nil {
		return m
	}
	return t.shared(key, m)
}

// sortedNames puts the names of m in order into b.names.
func sortedNames[K ~string, V any](b *keyBuffer, m map[K]V) []string {
	b.names = b.names[:0]
	for name := range m {
		b.names = append(b.names, string(name))
	}
	slices.Sort(b.names)
	return b.names
}

// attribute is one attribute's value: exactly one of the pointers is set
// for a value that is shared; list values are not shared.
type attribute struct {
	i    *int64
	b    *bool
	s, v *string
	list bool
}

// single reports whether the value is shared: exactly one scalar set.
func (a attribute) single() bool {
	set := 0
	for _, p := range [...]bool{a.i != nil, a.b != nil, a.s != nil, a.v != nil} {
		if p {
			set++
		}
	}
	return !a.list && set == 1
}

func internalAttribute(a resourceapi.DeviceAttribute) attribute {
	return attribute{i: a.IntValue, b: a.BoolValue, s: a.StringValue, v: a.VersionValue,
		list: a.IntValues != nil || a.BoolValues != nil || a.StringValues != nil || a.VersionValues != nil}
}

func v1Attribute(a resourcev1.DeviceAttribute) attribute {
	return attribute{i: a.IntValue, b: a.BoolValue, s: a.StringValue, v: a.VersionValue,
		list: a.IntValues != nil || a.BoolValues != nil || a.StringValues != nil || a.VersionValues != nil}
}

// internalCapacity is a capacity's value; a capacity with a request
// policy is not shared.
func internalCapacity(c resourceapi.DeviceCapacity) (resource.Quantity, bool) {
	return c.Value, c.RequestPolicy == nil
}

func v1Capacity(c resourcev1.DeviceCapacity) (resource.Quantity, bool) {
	return c.Value, c.RequestPolicy == nil
}

// attributesKey encodes the attributes into b, names in order, each value
// with its type and length, so that two maps have the same key exactly
// when they serialize the same. It is nil for an empty map and for maps
// with a value that is not shared (lists, or not exactly one value). The
// key is b's until the next call.
func attributesKey[K ~string, A any](b *keyBuffer, m map[K]A, value func(A) attribute) []byte {
	if len(m) == 0 {
		return nil
	}
	key := b.key[:0]
	for _, name := range sortedNames(b, m) {
		a := value(m[K(name)])
		if !a.single() {
			return nil
		}
		key = appendString(key, name)
		switch {
		case a.i != nil:
			key = append(key, 'i')
			key = appendString(key, strconv.FormatInt(*a.i, 10))
		case a.b != nil:
			key = append(key, 'b')
			key = appendString(key, strconv.FormatBool(*a.b))
		case a.s != nil:
			key = append(key, 's')
			key = appendString(key, *a.s)
		default:
			key = append(key, 'v')
			key = appendString(key, *a.v)
		}
	}
	b.key = key
	return key
}

// capacityKey encodes the capacities into b, names in order, each with
// its quantity as it serializes. It is nil for an empty map and for maps
// with a request policy. The key is b's until the next call.
func capacityKey[K ~string, C any](b *keyBuffer, m map[K]C, value func(C) (resource.Quantity, bool)) []byte {
	if len(m) == 0 {
		return nil
	}
	key := b.key[:0]
	for _, name := range sortedNames(b, m) {
		q, ok := value(m[K(name)])
		if !ok {
			return nil
		}
		key = appendString(key, name)
		key = appendString(key, q.String())
	}
	b.key = key
	return key
}

// appendString appends s with its length in front, so that no two
// sequences of strings encode the same.
func appendString(b []byte, s string) []byte {
	b = strconv.AppendInt(b, int64(len(s)), 10)
	b = append(b, ':')
	return append(b, s...)
}

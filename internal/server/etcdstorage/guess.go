package etcdstorage

import (
	"context"
	"reflect"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/storage"
)

// GuessFunc returns what an informer of the server's own objects holds
// under key ("namespace/name", or "name" for a cluster-scoped object): a
// copy the caller may change, of the type the resource is stored as, with
// everything the store has of it (managedFields included), or nil.
type GuessFunc func(key string) runtime.Object

// Guesses are where the stores of resources without a watch cache look up
// an object before they update or delete it. A watch cache hands its own
// copy to etcd3's GuaranteedUpdate and Delete as their
// cachedExistingObject, so that they write with a compare on its
// resourceVersion instead of reading the object from etcd first; a
// resource without one reads on every write. Its in-process informer
// holds the object anyway: a guess from it saves that read. A stale guess
// costs what a stale watch cache costs: the compare fails, etcd3 reads the
// object and tries again. A guess is trusted as much as the watch cache
// is, by its resourceVersion alone, so it must be this etcd's object
// exactly as stored: never an object of another cluster's (the host's in
// cluster mode), never one an informer's transform has cut down.
type Guesses struct {
	mu    sync.RWMutex
	funcs map[schema.GroupResource]GuessFunc
}

// Set makes the store of resource take its guesses from guess.
func (g *Guesses) Set(resource schema.GroupResource, guess GuessFunc) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.funcs == nil {
		g.funcs = map[schema.GroupResource]GuessFunc{}
	}
	g.funcs[resource] = guess
}

func (g *Guesses) get(resource schema.GroupResource) GuessFunc {
	if g == nil {
		return nil
	}
	g.mu.RLock()
	defer g.mu.RUnlock()
	return g.funcs[resource]
}

// guessingStorage is the store of a resource without a watch cache: its
// updates and deletes that come without a suggestion of the current object
// get a guess from guesses, if it has one for the key.
type guessingStorage struct {
	storage.Interface
	guesses  *Guesses
	resource schema.GroupResource
	// prefix is the resource's keys' prefix ("/pods/").
	prefix string
	// stored is the type the resource is stored as: a guess of another
	// type is not used.
	stored reflect.Type
}

func newGuessingStorage(store storage.Interface, guesses *Guesses, resource schema.GroupResource, resourcePrefix string, newFunc func() runtime.Object) storage.Interface {
	if guesses == nil {
		return store
	}
	return guessingStorage{Interface: store, guesses: guesses, resource: resource,
		prefix: strings.TrimSuffix(resourcePrefix, "/") + "/", stored: reflect.TypeOf(newFunc())}
}

// guess is the current object at key as the resource's informer has it,
// or nil.
func (s guessingStorage) guess(key string) runtime.Object {
	guess := s.guesses.get(s.resource)
	if guess == nil {
		return nil
	}
	name, ok := strings.CutPrefix(key, s.prefix)
	if !ok || name == "" {
		return nil
	}
	obj := guess(name)
	if obj == nil || reflect.TypeOf(obj) != s.stored || reflect.ValueOf(obj).IsNil() {
		return nil
	}
	return obj
}

func (s guessingStorage) GuaranteedUpdate(ctx context.Context, key string, destination runtime.Object, ignoreNotFound bool,
	preconditions *storage.Preconditions, tryUpdate storage.UpdateFunc, cachedExistingObject runtime.Object) error {
	if cachedExistingObject == nil {
		cachedExistingObject = s.guess(key)
	}
	return s.Interface.GuaranteedUpdate(ctx, key, destination, ignoreNotFound, preconditions, tryUpdate, cachedExistingObject)
}

func (s guessingStorage) Delete(ctx context.Context, key string, out runtime.Object, preconditions *storage.Preconditions,
	validateDeletion storage.ValidateObjectFunc, cachedExistingObject runtime.Object, opts storage.DeleteOptions) error {
	if cachedExistingObject == nil {
		cachedExistingObject = s.guess(key)
	}
	return s.Interface.Delete(ctx, key, out, preconditions, validateDeletion, cachedExistingObject, opts)
}

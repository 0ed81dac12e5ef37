// Package apitest holds helpers for tests of the API: the scheme the
// registries' tests decode and convert with, and fake clientsets that
// behave like the server where a controller relies on it.
package apitest

import (
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"

	"github.com/draplane/draplane/apis/resource/install"
)

// Scheme has resource.draplane.dev (every version) and whatever the
// given functions add (e.g. corev1.AddToScheme). It panics on an error:
// a scheme that cannot be built is a broken test.
func Scheme(add ...func(*runtime.Scheme) error) *runtime.Scheme {
	scheme := runtime.NewScheme()
	install.Install(scheme)
	for _, f := range add {
		if err := f(scheme); err != nil {
			panic(fmt.Sprintf("build test scheme: %v", err))
		}
	}
	return scheme
}

// FakeClient is what a generated fake clientset offers: reactors and the
// object tracker behind them.
type FakeClient interface {
	PrependReactor(verb, resource string, reaction k8stesting.ReactionFunc)
	Tracker() k8stesting.ObjectTracker
}

// UpdateConflicts makes updates of resource fail with a Conflict, as on
// the server, when they carry a resourceVersion other than the stored one
// (an update without one is unconditional). An update that goes through
// gets the resourceVersion nextRV returns.
func UpdateConflicts(client FakeClient, resource schema.GroupVersionResource, nextRV func() string) {
	client.PrependReactor("update", resource.Resource, func(action k8stesting.Action) (bool, runtime.Object, error) {
		obj, err := meta.Accessor(action.(k8stesting.UpdateAction).GetObject())
		if err != nil {
			return true, nil, err
		}
		stored, err := client.Tracker().Get(resource, obj.GetNamespace(), obj.GetName())
		if err != nil {
			return true, nil, err
		}
		storedMeta, _ := meta.Accessor(stored)
		if obj.GetResourceVersion() != "" && obj.GetResourceVersion() != storedMeta.GetResourceVersion() {
			return true, nil, apierrors.NewConflict(resource.GroupResource(), obj.GetName(), errors.New("the object has been modified"))
		}
		obj.SetResourceVersion(nextRV())
		return false, nil, nil
	})
}

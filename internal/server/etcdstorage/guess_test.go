package etcdstorage

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/storage"
	"k8s.io/apiserver/pkg/storage/storagebackend"
)

// TestGuesses: the store of a resource without a watch cache updates and
// deletes on the guess of its informer when that is current (it writes
// what the guess holds, with no read of its own: a guess that differs from
// etcd under the same resourceVersion shows it), reads and retries when
// the guess is stale, and ignores a guess of another type and a nil one.
func TestGuesses(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	e, codecs := startTestEtcd(ctx, t)
	pods := schema.GroupResource{Resource: "pods"}
	config := storagebackend.NewDefaultConfig("/registry", codecs.LegacyCodec(corev1.SchemeGroupVersion))
	guesses := &Guesses{}
	getter := e.InProcessRESTOptions(staticRESTOptions{config.ForResource(pods)}, func(schema.GroupResource) bool { return false }, guesses)
	opts, err := getter.GetRESTOptions(pods, &corev1.Pod{})
	if err != nil {
		t.Fatal(err)
	}
	store, destroy, err := opts.Decorator(opts.StorageConfig, "/pods",
		func(obj runtime.Object) (string, error) { return storage.NamespaceKeyFunc("/pods/", obj) },
		func() runtime.Object { return &corev1.Pod{} }, func() runtime.Object { return &corev1.PodList{} },
		storage.DefaultNamespaceScopedAttr, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer destroy()
	if _, ok := store.(guessingStorage); !ok {
		t.Fatalf("store of an uncached resource is %T, want guessingStorage", store)
	}

	// marked is a copy of pod with a label etcd does not have.
	marked := func(pod *corev1.Pod) *corev1.Pod {
		pod = pod.DeepCopy()
		pod.Labels = map[string]string{"guessed": "true"}
		return pod
	}
	for _, tc := range []struct {
		name string
		// guess returns the guess for the stored pod and its first
		// version.
		guess func(current, first *corev1.Pod) runtime.Object
		// usedGuess: the update started from the guess.
		usedGuess bool
		// tries is how often the update function runs.
		tries int
	}{
		{name: "no guess", guess: nil, tries: 1},
		{name: "current", guess: func(current, _ *corev1.Pod) runtime.Object { return marked(current) }, usedGuess: true, tries: 1},
		{name: "stale", guess: func(_, first *corev1.Pod) runtime.Object { return marked(first) }, tries: 2},
		{name: "not found", guess: func(*corev1.Pod, *corev1.Pod) runtime.Object { return nil }, tries: 1},
		{name: "typed nil", guess: func(*corev1.Pod, *corev1.Pod) runtime.Object { return (*corev1.Pod)(nil) }, tries: 1},
		{name: "other type", guess: func(current, _ *corev1.Pod) runtime.Object {
			return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: current.Name, ResourceVersion: current.ResourceVersion}}
		}, tries: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := "/pods/default/" + strings.ReplaceAll(tc.name, " ", "-")
			first := &corev1.Pod{}
			if err := store.Create(ctx, key, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: strings.ReplaceAll(tc.name, " ", "-"), Namespace: "default"}}, first, 0); err != nil {
				t.Fatal(err)
			}
			// A second version, which the stale guess misses.
			current := &corev1.Pod{}
			if err := store.GuaranteedUpdate(ctx, key, current, false, nil, func(input runtime.Object, _ storage.ResponseMeta) (runtime.Object, *uint64, error) {
				pod := input.(*corev1.Pod)
				pod.Annotations = map[string]string{"version": "2"}
				return pod, nil, nil
			}, nil); err != nil {
				t.Fatal(err)
			}
			var asked []string
			guesses.Set(pods, nil)
			if tc.guess != nil {
				guesses.Set(pods, func(name string) runtime.Object {
					asked = append(asked, name)
					return tc.guess(current, first)
				})
			}

			tries := 0
			updated := &corev1.Pod{}
			if err := store.GuaranteedUpdate(ctx, key, updated, false, nil, func(input runtime.Object, _ storage.ResponseMeta) (runtime.Object, *uint64, error) {
				tries++
				pod := input.(*corev1.Pod)
				pod.Spec.NodeName = "node-1"
				return pod, nil, nil
			}, nil); err != nil {
				t.Fatal(err)
			}
			if tc.guess != nil && (len(asked) != 1 || asked[0] != "default/"+strings.ReplaceAll(tc.name, " ", "-")) {
				t.Errorf("guesses asked for %q, want once for default/%s", asked, strings.ReplaceAll(tc.name, " ", "-"))
			}
			if got := updated.Labels["guessed"] == "true"; got != tc.usedGuess {
				t.Errorf("update started from the guess: %v, want %v", got, tc.usedGuess)
			}
			if tries != tc.tries {
				t.Errorf("update function ran %d times, want %d", tries, tc.tries)
			}
			if updated.Spec.NodeName != "node-1" || updated.Annotations["version"] != "2" {
				t.Errorf("updated pod has node %q and version %q, want node-1 and 2", updated.Spec.NodeName, updated.Annotations["version"])
			}

			// Deleting: validateDeletion sees the current object, even
			// after a stale guess.
			var validated *corev1.Pod
			deleted := &corev1.Pod{}
			if err := store.Delete(ctx, key, deleted, nil, func(_ context.Context, obj runtime.Object) error {
				validated = obj.(*corev1.Pod)
				return nil
			}, nil, storage.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			if validated == nil || validated.Spec.NodeName != "node-1" {
				t.Errorf("deletion validated %v, want the updated pod", validated)
			}
			if err := store.Get(ctx, key, storage.GetOptions{}, &corev1.Pod{}); !storage.IsNotFound(err) {
				t.Errorf("get after delete: %v, want not found", err)
			}
		})
	}
}

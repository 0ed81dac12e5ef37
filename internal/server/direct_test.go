package server

import (
	"context"
	"errors"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"

	resourceapi "github.com/draplane/draplane/apis/resource"
	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
)

// TestConvertingWatch: the direct informers' watch converts each event's
// object, passes errors on, and ends (closing its channel) when its
// watch ends, on Stop and when the request's context is done, whether or
// not anyone reads it.
func TestConvertingWatch(t *testing.T) {
	newWatch := func(ctx context.Context) (*watch.FakeWatcher, *convertingWatch, chan struct{}) {
		in := watch.NewFakeWithChanSize(10, false)
		closed := make(chan struct{})
		w := newConvertingWatch(ctx, in, func() { close(closed) },
			func(obj runtime.Object) (runtime.Object, error) {
				slice, ok := obj.(*resourceapi.ResourceSlice)
				if !ok {
					return nil, errors.New("not a slice")
				}
				return &resourcev1.ResourceSlice{ObjectMeta: *slice.ObjectMeta.DeepCopy()}, nil
			})
		go w.loop()
		return in, w, closed
	}
	ended := func(t *testing.T, w *convertingWatch, closed chan struct{}) {
		t.Helper()
		select {
		case <-closed:
		case <-time.After(wait.ForeverTestTimeout):
			t.Fatal("the watch did not end")
		}
		if _, ok := <-w.ResultChan(); ok {
			t.Fatal("the watch's channel is open after it ended")
		}
	}

	t.Run("events", func(t *testing.T) {
		in, w, closed := newWatch(context.Background())
		in.Add(&resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "a"}})
		status := apierrors.NewResourceExpired("too old").ErrStatus
		in.Error(&status)
		in.Modify(&resourceapi.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "not-a-slice"}})
		in.Stop()

		event := <-w.ResultChan()
		if slice, ok := event.Object.(*resourcev1.ResourceSlice); event.Type != watch.Added || !ok || slice.Name != "a" {
			t.Errorf("first event %s %T, want Added of the converted slice a", event.Type, event.Object)
		}
		event = <-w.ResultChan()
		if got, ok := event.Object.(*metav1.Status); event.Type != watch.Error || !ok || got.Reason != metav1.StatusReasonExpired {
			t.Errorf("second event %s %#v, want the Error as it came", event.Type, event.Object)
		}
		event = <-w.ResultChan()
		if got, ok := event.Object.(*metav1.Status); event.Type != watch.Error || !ok || got.Code != 500 {
			t.Errorf("third event %s %#v, want an internal Error for an object that does not convert", event.Type, event.Object)
		}
		ended(t, w, closed)
	})

	t.Run("stop while an event waits for its reader", func(t *testing.T) {
		in, w, closed := newWatch(context.Background())
		in.Add(&resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "unread"}})
		// Let the loop take the event and wait to hand it over.
		time.Sleep(10 * time.Millisecond)
		w.Stop()
		w.Stop()
		ended(t, w, closed)
		if !in.IsStopped() {
			t.Error("the store's watch was not stopped")
		}
	})

	t.Run("context done", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		in, w, closed := newWatch(ctx)
		cancel()
		ended(t, w, closed)
		if !in.IsStopped() {
			t.Error("the store's watch was not stopped")
		}
	})
}

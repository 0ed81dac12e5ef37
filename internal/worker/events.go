package worker

import (
	"context"
	"hash/fnv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
)

// StartRecorder starts the event recording of a controller: events are
// written through shards broadcasters; stop (or the end of ctx) shuts
// them down. One broadcaster writes one event at a time and drops events
// once 1,000 wait, so a controller that records an event per pod at
// hundreds of pods a second needs several. An object's events always go
// through the same broadcaster, whose correlator counts repeats of an
// event.
func StartRecorder(ctx context.Context, client kubernetes.Interface, scheme *runtime.Scheme, component string, shards int) (recorder record.EventRecorder, stop func()) {
	recorders := make(shardedRecorder, max(shards, 1))
	broadcasters := make([]record.EventBroadcaster, len(recorders))
	for i := range recorders {
		broadcaster := record.NewBroadcaster(record.WithContext(ctx))
		broadcasters[i] = broadcaster
		if i == 0 {
			broadcaster.StartStructuredLogging(3)
		}
		broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
		recorders[i] = broadcaster.NewRecorder(scheme, corev1.EventSource{Component: component})
	}
	stop = func() {
		for _, b := range broadcasters {
			b.Shutdown()
		}
	}
	if len(recorders) == 1 {
		return recorders[0], stop
	}
	return recorders, stop
}

// shardedRecorder records each object's events through one of several
// recorders, chosen by the object's UID.
type shardedRecorder []record.EventRecorder

var _ record.EventRecorder = shardedRecorder{}

// shard picks the recorder of an object.
func (r shardedRecorder) shard(object runtime.Object) record.EventRecorder {
	accessor, err := meta.Accessor(object)
	if err != nil {
		return r[0]
	}
	h := fnv.New32a()
	_, _ = h.Write([]byte(accessor.GetUID()))
	return r[h.Sum32()%uint32(len(r))]
}

func (r shardedRecorder) Event(object runtime.Object, eventType, reason, message string) {
	r.shard(object).Event(object, eventType, reason, message)
}

func (r shardedRecorder) Eventf(object runtime.Object, eventType, reason, messageFmt string, args ...any) {
	r.shard(object).Eventf(object, eventType, reason, messageFmt, args...)
}

func (r shardedRecorder) AnnotatedEventf(object runtime.Object, annotations map[string]string, eventType, reason, messageFmt string, args ...any) {
	r.shard(object).AnnotatedEventf(object, annotations, eventType, reason, messageFmt, args...)
}

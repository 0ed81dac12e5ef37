package worker

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
)

// TestShardedRecorder: every event of an object goes through the same
// broadcaster, and the objects are spread over all of them.
func TestShardedRecorder(t *testing.T) {
	const shards = 4
	fakes := make([]*record.FakeRecorder, shards)
	recorder := make(shardedRecorder, shards)
	for i := range fakes {
		fakes[i] = record.NewFakeRecorder(1000)
		recorder[i] = fakes[i]
	}
	const pods = 200
	for i := range pods {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("pod-%d", i), UID: types.UID(fmt.Sprintf("uid-%d", i))}}
		recorder.Eventf(pod, corev1.EventTypeNormal, "Scheduled", "first of %s", pod.Name)
		recorder.Event(pod, corev1.EventTypeNormal, "Scheduled", "second of "+pod.Name)
		recorder.AnnotatedEventf(pod, nil, corev1.EventTypeNormal, "Scheduled", "third of %s", pod.Name)
	}
	total := 0
	for i, fake := range fakes {
		close(fake.Events)
		got := map[string]int{}
		for event := range fake.Events {
			fields := strings.Fields(event) // "Normal Scheduled first of pod-7"
			got[fields[len(fields)-1]]++
			total++
		}
		if len(got) == 0 {
			t.Errorf("broadcaster %d got no events", i)
		}
		for pod, n := range got {
			if n != 3 {
				t.Errorf("broadcaster %d got %d of the 3 events of %s", i, n, pod)
			}
		}
	}
	if total != 3*pods {
		t.Errorf("%d events recorded, want %d", total, 3*pods)
	}
}

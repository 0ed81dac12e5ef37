package driver

import (
	"context"
	"errors"
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2/ktesting"

	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
)

type answering struct {
	results map[types.UID]PrepareResult
	err     error
}

func (a answering) PrepareResourceClaims(context.Context, []*resourcev1.ResourceClaim) (map[types.UID]PrepareResult, error) {
	return a.results, a.err
}

func (a answering) UnprepareResourceClaims(_ context.Context, claims []NamespacedObject) (map[types.UID]error, error) {
	out := map[types.UID]error{}
	for uid, r := range a.results {
		out[uid] = r.Err
	}
	return out, a.err
}

func TestPrepare(t *testing.T) {
	claims := []*resourcev1.ResourceClaim{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a", UID: "a"}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "b", UID: "b"}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c", UID: "c"}},
	}
	tests := map[string]struct {
		preparer   answering
		wantOK     int
		wantFailed string
	}{
		"all prepared": {preparer: answering{results: map[types.UID]PrepareResult{"a": {}, "b": {}, "c": {}}}, wantOK: 3, wantFailed: "[]"},
		"partial success": {preparer: answering{results: map[types.UID]PrepareResult{"a": {}, "b": {Err: errors.New("busy")}, "c": {}}},
			wantOK: 2, wantFailed: "[claim ns/b: busy]"},
		"a claim left out counts as failed": {preparer: answering{results: map[types.UID]PrepareResult{"a": {}, "b": {}}},
			wantOK: 2, wantFailed: "[claim ns/c: the driver did not answer for this claim]"},
		"whole call failed": {preparer: answering{err: errors.New("plugin gone")},
			wantFailed: "[claim ns/a: plugin gone claim ns/b: plugin gone claim ns/c: plugin gone]"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			_, ctx := ktesting.NewTestContext(t)
			ok, failed := Prepare(ctx, tc.preparer, claims)
			if len(ok) != tc.wantOK {
				t.Errorf("%d prepared, want %d", len(ok), tc.wantOK)
			}
			if got := fmt.Sprint(failed); got != tc.wantFailed {
				t.Errorf("failed %s, want %s", got, tc.wantFailed)
			}
			held := []NamespacedObject{{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "a"}, UID: "a"}}
			if errs := Unprepare(ctx, tc.preparer, held); (len(errs) > 0) != (tc.preparer.err != nil) {
				t.Errorf("unprepare errors %v", errs)
			}
		})
	}
}

package node

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	resourceapi "github.com/draplane/draplane/apis/resource"
	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
	resourcelisters "github.com/draplane/draplane/generated/listers/resource/v1"
)

var nodeA = &user.DefaultInfo{Name: "draplane:node:a", Groups: []string{"draplane:nodes", "draplane:driver:gpu.example.com"}}

func onNode(node string) *corev1.NodeSelector {
	return &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{
		{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{node}},
	}}}}
}

func testAuthorizer() *Authorizer {
	claims := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	for name, node := range map[string]string{"on-a": "a", "on-b": "b"} {
		_ = claims.Add(&resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"},
			Status: resourcev1.ResourceClaimStatus{Allocation: &resourcev1.AllocationResult{NodeSelector: onNode(node)}}})
	}
	_ = claims.Add(&resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "unallocated", Namespace: "ns"}})
	// Claims of devices reachable from every node (no node selector),
	// by whom they are reserved for.
	for name, consumers := range map[string][]resourcev1.ResourceClaimConsumerReference{
		"anywhere-for-a":       {{Resource: "pods", Name: "p-a", UID: "uid-p-a"}},
		"anywhere-for-b":       {{Resource: "pods", Name: "p-b", UID: "uid-p-b"}},
		"anywhere-for-a-again": {{Resource: "pods", Name: "p-a", UID: "uid-p-a-old"}},
		"anywhere-for-nobody":  nil,
		"anywhere-for-group":   {{APIGroup: "scheduling.k8s.io", Resource: "podgroups", Name: "g", UID: "uid-g"}},
		"anywhere-for-group-b": {{APIGroup: "scheduling.k8s.io", Resource: "podgroups", Name: "gb", UID: "uid-gb"}},
	} {
		_ = claims.Add(&resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"},
			Status: resourcev1.ResourceClaimStatus{Allocation: &resourcev1.AllocationResult{}, ReservedFor: consumers}})
	}
	pods := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	_ = pods.Add(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p-a", Namespace: "ns", UID: "uid-p-a"}, Spec: corev1.PodSpec{NodeName: "a"}})
	_ = pods.Add(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p-b", Namespace: "ns", UID: "uid-p-b"}, Spec: corev1.PodSpec{NodeName: "b"}})
	inGroup := func(group string) *corev1.PodSchedulingGroup {
		return &corev1.PodSchedulingGroup{PodGroupName: ptr.To(group)}
	}
	_ = pods.Add(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "g-0", Namespace: "ns"}, Spec: corev1.PodSpec{NodeName: "a", SchedulingGroup: inGroup("g")}})
	_ = pods.Add(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "gb-0", Namespace: "ns"}, Spec: corev1.PodSpec{NodeName: "b", SchedulingGroup: inGroup("gb")}})
	_ = pods.Add(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "gb-1", Namespace: "other"}, Spec: corev1.PodSpec{NodeName: "a", SchedulingGroup: inGroup("gb")}})
	return &Authorizer{Claims: resourcelisters.NewResourceClaimLister(claims), Pods: corelisters.NewPodLister(pods)}
}

func TestAuthorizer(t *testing.T) {
	a := testAuthorizer()
	other := &user.DefaultInfo{Name: "alice"}
	req := func(u user.Info, verb, group, resource, sub, name string) authorizer.AttributesRecord {
		return authorizer.AttributesRecord{User: u, Verb: verb, APIGroup: group, Resource: resource, Subresource: sub, Namespace: "ns", Name: name, ResourceRequest: true}
	}
	for _, tc := range []struct {
		name     string
		attrs    authorizer.AttributesRecord
		wantDeny string
	}{
		{"claim on its node", req(nodeA, "get", "resource.draplane.dev", "resourceclaims", "", "on-a"), ""},
		{"claim on another node", req(nodeA, "get", "resource.k8s.io", "resourceclaims", "", "on-b"), "claim ns/on-b is not"},
		{"claim not allocated", req(nodeA, "get", "resource.draplane.dev", "resourceclaims", "", "unallocated"), "claim ns/unallocated is not"},
		{"claim missing", req(nodeA, "get", "resource.draplane.dev", "resourceclaims", "", "gone"), "does not exist"},
		{"status of a claim on another node", req(nodeA, "patch", "resource.draplane.dev", "resourceclaims", "status", "on-b"), "claim ns/on-b is not"},
		{"claim without node selector, reserved for a pod on its node", req(nodeA, "get", "resource.k8s.io", "resourceclaims", "", "anywhere-for-a"), ""},
		{"its status, reserved for a pod on its node", req(nodeA, "patch", "resource.k8s.io", "resourceclaims", "status", "anywhere-for-a"), ""},
		{"claim without node selector, reserved for a pod on another node", req(nodeA, "get", "resource.k8s.io", "resourceclaims", "", "anywhere-for-b"), "claim ns/anywhere-for-b is used by no pod on it"},
		{"its status, reserved for a pod on another node", req(nodeA, "patch", "resource.draplane.dev", "resourceclaims", "status", "anywhere-for-b"), "claim ns/anywhere-for-b is used by no pod on it"},
		{"claim without node selector, reserved for an earlier pod of the name", req(nodeA, "get", "resource.k8s.io", "resourceclaims", "", "anywhere-for-a-again"), "is used by no pod on it"},
		{"claim without node selector, reserved for nobody", req(nodeA, "get", "resource.k8s.io", "resourceclaims", "", "anywhere-for-nobody"), "is used by no pod on it"},
		{"claim without node selector, reserved for a PodGroup with a pod on its node", req(nodeA, "get", "resource.k8s.io", "resourceclaims", "", "anywhere-for-group"), ""},
		{"claim without node selector, reserved for a PodGroup without pods on its node", req(nodeA, "get", "resource.k8s.io", "resourceclaims", "", "anywhere-for-group-b"), "is used by no pod on it"},
		{"claims listed", req(nodeA, "list", "resource.draplane.dev", "resourceclaims", "", ""), "one by name"},
		{"its own node", req(nodeA, "patch", "", "nodes", "status", "a"), ""},
		{"another node", req(nodeA, "update", "", "nodes", "", "b"), "only write its own Node a"},
		{"its pod's status", req(nodeA, "patch", "", "pods", "status", "p-a"), ""},
		{"another node's pod's status", req(nodeA, "patch", "", "pods", "status", "p-b"), "pod ns/p-b is not"},
		{"slices as a collection without selector", req(nodeA, "deletecollection", "resource.draplane.dev", "resourceslices", "", ""), "field selector"},
		{"not a node identity", req(other, "get", "resource.draplane.dev", "resourceclaims", "", "on-b"), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			decision, reason, err := a.Authorize(context.Background(), tc.attrs)
			if err != nil {
				t.Fatal(err)
			}
			if tc.wantDeny == "" && decision != authorizer.DecisionNoOpinion || tc.wantDeny != "" && (decision != authorizer.DecisionDeny || !strings.Contains(reason, tc.wantDeny)) {
				t.Errorf("decision %v %q, want deny naming %q (\"\": no opinion)", decision, reason, tc.wantDeny)
			}
		})
	}
}

func TestAdmission(t *testing.T) {
	slice := func(node, driver string) *resourceapi.ResourceSlice {
		return &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "s"}, Spec: resourceapi.ResourceSliceSpec{NodeName: ptr.To(node), Driver: driver}}
	}
	claim := func(devices int, reserved int) *resourceapi.ResourceClaim {
		c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ns"}}
		for i := range devices {
			c.Status.Devices = append(c.Status.Devices, resourceapi.AllocatedDeviceStatus{Driver: "gpu.example.com", Pool: "a", Device: fmt.Sprintf("gpu-%d", i)})
		}
		c.Status.ReservedFor = make([]resourceapi.ResourceClaimConsumerReference, reserved)
		return c
	}
	// withDevice adds (or, given a message, changes) one device's status.
	withDevice := func(c *resourceapi.ResourceClaim, driver, device, message string) *resourceapi.ResourceClaim {
		c = c.DeepCopy()
		entry := resourceapi.AllocatedDeviceStatus{Driver: driver, Pool: "a", Device: device}
		if message != "" {
			entry.Conditions = []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Configured", Message: message}}
		}
		for i := range c.Status.Devices {
			if d := c.Status.Devices[i]; d.Driver == driver && d.Device == device {
				c.Status.Devices[i] = entry
				return c
			}
		}
		c.Status.Devices = append(c.Status.Devices, entry)
		return c
	}
	slices := schema.GroupVersionResource{Group: "resource.k8s.io", Version: "v1", Resource: "resourceslices"}
	claims := schema.GroupVersionResource{Group: "resource.draplane.dev", Version: "v1", Resource: "resourceclaims"}
	nodes := schema.GroupVersionResource{Version: "v1", Resource: "nodes"}
	for _, tc := range []struct {
		name     string
		resource schema.GroupVersionResource
		sub      string
		op       admission.Operation
		obj, old runtime.Object
		objName  string
		wantErr  string
	}{
		{name: "own slice", resource: slices, op: admission.Create, obj: slice("a", "gpu.example.com")},
		{name: "another node's slice", resource: slices, op: admission.Create, obj: slice("b", "gpu.example.com"), wantErr: `slice s has "b"`},
		{name: "slice without a node", resource: slices, op: admission.Create, obj: &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "s"}, Spec: resourceapi.ResourceSliceSpec{Driver: "gpu.example.com"}}, wantErr: `has ""`},
		{name: "driver not allowed", resource: slices, op: admission.Create, obj: slice("a", "nic.example.com"), wantErr: "lacks the group draplane:driver:nic.example.com"},
		{name: "deleting another node's slice", resource: slices, op: admission.Delete, old: slice("b", "gpu.example.com"), wantErr: `has "b"`},
		{name: "own node registered", resource: nodes, op: admission.Create, obj: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "a"}}, objName: "a"},
		{name: "another node registered", resource: nodes, op: admission.Create, obj: &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "b"}}, objName: "b", wantErr: "only register its own Node a"},
		{name: "claim devices status", resource: claims, sub: "status", op: admission.Update, obj: claim(1, 1), old: claim(0, 1)},
		{name: "claim reservedFor", resource: claims, sub: "status", op: admission.Update, obj: claim(0, 2), old: claim(0, 1), wantErr: "only change status.devices"},
		{name: "its driver's device status changed beside another driver's", resource: claims, sub: "status", op: admission.Update,
			obj: withDevice(withDevice(claim(1, 1), "nic.example.com", "nic-0", ""), "gpu.example.com", "gpu-0", "up"), old: withDevice(claim(1, 1), "nic.example.com", "nic-0", "")},
		{name: "another driver's device status added", resource: claims, sub: "status", op: admission.Update,
			obj: withDevice(claim(1, 1), "nic.example.com", "nic-0", ""), old: claim(1, 1), wantErr: "may not write the status of devices of driver nic.example.com: it lacks the group draplane:driver:nic.example.com"},
		{name: "another driver's device status changed", resource: claims, sub: "status", op: admission.Update,
			obj: withDevice(claim(1, 1), "nic.example.com", "nic-0", "hijacked"), old: withDevice(claim(1, 1), "nic.example.com", "nic-0", ""), wantErr: "driver nic.example.com"},
		{name: "another driver's device status removed", resource: claims, sub: "status", op: admission.Update,
			obj: claim(1, 1), old: withDevice(claim(1, 1), "nic.example.com", "nic-0", ""), wantErr: "driver nic.example.com"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			attrs := admission.NewAttributesRecord(tc.obj, tc.old, schema.GroupVersionKind{}, "ns", tc.objName, tc.resource, tc.sub, tc.op, nil, false, nodeA)
			err := NewAdmission().Validate(context.Background(), attrs, nil)
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("error %v, want one naming %q", err, tc.wantErr)
			}
		})
	}
}

// TestAdmissionServiceAccount: in aggregated mode a driver's service
// account is held to the node its bound token names, as a node's
// certificate is.
func TestAdmissionServiceAccount(t *testing.T) {
	const sa = "system:serviceaccount:dra:gpu-driver"
	p := NewAdmission()
	p.DriverServiceAccounts = map[string][]string{sa: {"gpu.example.com"}}
	onA := &user.DefaultInfo{Name: sa, Extra: map[string][]string{NodeNameExtra: {"a"}}}
	slice := func(node, driver string) *resourceapi.ResourceSlice {
		return &resourceapi.ResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "s"}, Spec: resourceapi.ResourceSliceSpec{NodeName: ptr.To(node), Driver: driver}}
	}
	deviceStatus := func(driver string) *resourceapi.ResourceClaim {
		return &resourceapi.ResourceClaim{Status: resourceapi.ResourceClaimStatus{Devices: []resourceapi.AllocatedDeviceStatus{{Driver: driver, Pool: "a", Device: "d"}}}}
	}
	slices := schema.GroupVersionResource{Group: "resource.draplane.dev", Version: "v1", Resource: "resourceslices"}
	claims := schema.GroupVersionResource{Group: "resource.draplane.dev", Version: "v1", Resource: "resourceclaims"}
	for _, tc := range []struct {
		name     string
		user     user.Info
		resource schema.GroupVersionResource
		sub      string
		op       admission.Operation
		obj, old runtime.Object
		wantErr  string
	}{
		{name: "own node's slice", user: onA, resource: slices, op: admission.Create, obj: slice("a", "gpu.example.com")},
		{name: "another node's slice", user: onA, resource: slices, op: admission.Update, obj: slice("b", "gpu.example.com"), old: slice("b", "gpu.example.com"), wantErr: `slice s has "b"`},
		{name: "another node's slice deleted", user: onA, resource: slices, op: admission.Delete, old: slice("b", "gpu.example.com"), wantErr: `slice s has "b"`},
		{name: "driver not listed", user: onA, resource: slices, op: admission.Create, obj: slice("a", "nic.example.com"), wantErr: "not listed for the service account"},
		{name: "token without a node", user: &user.DefaultInfo{Name: sa}, resource: slices, op: admission.Create, obj: slice("a", "gpu.example.com"), wantErr: "names no node"},
		{name: "without a node, a claim is created", user: &user.DefaultInfo{Name: sa}, resource: claims, sub: "", op: admission.Create, obj: &resourceapi.ResourceClaim{}},
		{name: "device status of a listed driver", user: onA, resource: claims, sub: "status", op: admission.Update, obj: deviceStatus("gpu.example.com"), old: &resourceapi.ResourceClaim{}},
		{name: "device status of a driver not listed", user: onA, resource: claims, sub: "status", op: admission.Update, obj: deviceStatus("nic.example.com"), old: &resourceapi.ResourceClaim{},
			wantErr: "may not write the status of devices of driver nic.example.com: the driver is not listed for the service account"},
		{name: "another service account", user: &user.DefaultInfo{Name: "system:serviceaccount:dra:controller", Extra: map[string][]string{NodeNameExtra: {"a"}}},
			resource: slices, op: admission.Create, obj: slice("b", "nic.example.com")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			attrs := admission.NewAttributesRecord(tc.obj, tc.old, schema.GroupVersionKind{}, "", "s", tc.resource, tc.sub, tc.op, nil, false, tc.user)
			err := p.Validate(context.Background(), attrs, nil)
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Errorf("error %v, want one naming %q", err, tc.wantErr)
			}
		})
	}
}

package main

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
	"github.com/draplane/draplane/controllers/podclaims"
	"github.com/draplane/draplane/driver"
	"github.com/draplane/draplane/generated/clientset/versioned"
)

// agent plays the kubelet for the driver's node: prepare before Running,
// unprepare when done.
type agent struct {
	nodeName, driverName string
	kubeClient           kubernetes.Interface
	resourceClient       versioned.Interface
	podLister            corelisters.PodLister
	preparer             driver.Preparer
	recorder             record.EventRecorder
	queue                workqueue.TypedRateLimitingInterface[string]
	// prepared: the claims held per pod key (one worker: no lock).
	prepared map[string][]driver.NamespacedObject
}

func (a *agent) sync(ctx context.Context, key string) error {
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil
	}
	pod, err := a.podLister.Pods(namespace).Get(name)
	if apierrors.IsNotFound(err) || err == nil && (pod.DeletionTimestamp != nil || podclaims.IsDone(pod)) {
		return a.unprepare(ctx, key)
	}
	if err != nil {
		return err
	}
	if pod.Status.Phase != "" && pod.Status.Phase != corev1.PodPending {
		return nil
	}
	var claims []*resourcev1.ResourceClaim
	for _, podClaim := range podclaims.ClaimsOf(pod) {
		claimName, _, err := podclaims.ClaimName(pod, podClaim)
		if err != nil {
			return err
		}
		if claimName == nil {
			continue
		}
		claim, err := a.resourceClient.ResourceV1().ResourceClaims(namespace).Get(ctx, *claimName, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("claim %s: %w", *claimName, err)
		}
		if claim.Status.Allocation == nil || !podclaims.IsReservedForPod(pod, claim) {
			return fmt.Errorf("claim %s not allocated and reserved for the pod yet", *claimName)
		}
		if len(driver.AllocatedDevices(claim, a.driverName)) > 0 {
			claims = append(claims, claim)
		}
	}
	if len(claims) > 0 {
		_, failed := driver.Prepare(ctx, a.preparer, claims)
		if len(failed) > 0 {
			errs := make([]error, 0, len(failed))
			for _, f := range failed {
				a.recorder.Eventf(pod, corev1.EventTypeWarning, "FailedPrepareDynamicResources",
					"Failed to prepare claim %s with driver %s: %v", f.Claim.Name, a.driverName, f.Err)
				errs = append(errs, f)
			}
			return errors.Join(errs...)
		}
		held := make([]driver.NamespacedObject, 0, len(claims))
		for _, c := range claims {
			held = append(held, driver.NamespacedObject{NamespacedName: types.NamespacedName{Namespace: c.Namespace, Name: c.Name}, UID: c.UID})
		}
		a.prepared[key] = held
	}
	pod = pod.DeepCopy()
	now := metav1.Now()
	pod.Status.Phase = corev1.PodRunning
	pod.Status.StartTime = &now
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now}}
	if _, err := a.kubeClient.CoreV1().Pods(namespace).UpdateStatus(ctx, pod, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	klog.FromContext(ctx).Info("Pod running", "pod", klog.KObj(pod), "claims", len(claims))
	return nil
}

func (a *agent) unprepare(ctx context.Context, key string) error {
	held, ok := a.prepared[key]
	if !ok {
		return nil
	}
	if failed := driver.Unprepare(ctx, a.preparer, held); len(failed) > 0 {
		return fmt.Errorf("unprepare: %v", failed)
	}
	delete(a.prepared, key)
	return nil
}

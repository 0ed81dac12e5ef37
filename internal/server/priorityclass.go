package server

import (
	"context"
	"fmt"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/registry/generic"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/klog/v2"

	"github.com/draplane/draplane/internal/features"
	"github.com/draplane/draplane/internal/registry/core"
	"github.com/draplane/draplane/internal/registry/core/priorityclass"
)

// priorityAdmission resolves the priority of new pods from the
// PriorityClass informer.
func (c *CoreLite) priorityAdmission() admission.Interface {
	return priorityclass.NewAdmission(c.informers.Scheduling().V1().PriorityClasses())
}

// installScheduling serves scheduling.k8s.io: v1 PriorityClasses, with
// the system classes created at start as the kube-apiserver does, and,
// with the GenericWorkload gate, v1beta1 PodGroups.
func (c *CoreLite) installScheduling(s *genericapiserver.GenericAPIServer, handlers handlerInstaller, scheme *runtime.Scheme, codecs serializer.CodecFactory, optsGetter generic.RESTOptionsGetter) error {
	storage, err := core.NewSchedulingStorage(optsGetter)
	if err != nil {
		return fmt.Errorf("scheduling.k8s.io/v1 storage: %w", err)
	}
	info := newAPIGroupInfo("scheduling.k8s.io", scheme, codecs)
	info.VersionedResourcesStorageMap["v1"] = storage
	if features.Enabled(features.GenericWorkload) {
		podGroups, err := core.NewSchedulingV1beta1Storage(optsGetter)
		if err != nil {
			return fmt.Errorf("scheduling.k8s.io/v1beta1 storage: %w", err)
		}
		info.VersionedResourcesStorageMap["v1beta1"] = podGroups
	}
	// Only the versions served: without the gate, v1beta1 has no
	// resources and would be announced for nothing.
	info.PrioritizedVersions = slices.DeleteFunc(info.PrioritizedVersions, func(gv schema.GroupVersion) bool {
		_, served := info.VersionedResourcesStorageMap[gv.Version]
		return !served
	})
	if err := handlers.install(s, genericapiserver.APIGroupPrefix, &info); err != nil {
		return fmt.Errorf("install scheduling.k8s.io: %w", err)
	}
	return s.AddPostStartHook("scheduling/bootstrap-system-priority-classes", c.createSystemPriorityClasses)
}

// createSystemPriorityClasses creates system-node-critical and
// system-cluster-critical. /readyz waits for it.
func (c *CoreLite) createSystemPriorityClasses(hook genericapiserver.PostStartHookContext) error {
	logger := klog.Background().WithName("bootstrap-system-priority-classes")
	return wait.PollUntilContextTimeout(hook, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		for _, pc := range priorityclass.SystemPriorityClasses() {
			_, err := c.client.SchedulingV1().PriorityClasses().Create(ctx, pc, metav1.CreateOptions{})
			if err != nil && !apierrors.IsAlreadyExists(err) {
				logger.V(2).Info("PriorityClass not created yet, retrying", "priorityClass", pc.Name, "err", err)
				return false, nil
			}
		}
		return true, nil
	})
}

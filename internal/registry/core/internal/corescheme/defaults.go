package corescheme

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
)

// k8s.io/api carries no defaulting funcs, so the defaults kubectl users rely on
// are registered here. They run on every decode of these types.
func addDefaultingFuncs(scheme *runtime.Scheme) error {
	scheme.AddTypeDefaultingFunc(&corev1.Pod{}, func(obj interface{}) { SetDefaultsPod(obj.(*corev1.Pod)) })
	scheme.AddTypeDefaultingFunc(&corev1.PodList{}, func(obj interface{}) {
		list := obj.(*corev1.PodList)
		for i := range list.Items {
			SetDefaultsPod(&list.Items[i])
		}
	})
	scheme.AddTypeDefaultingFunc(&corev1.Namespace{}, func(obj interface{}) { SetDefaultsNamespace(obj.(*corev1.Namespace)) })
	scheme.AddTypeDefaultingFunc(&corev1.NamespaceList{}, func(obj interface{}) {
		list := obj.(*corev1.NamespaceList)
		for i := range list.Items {
			SetDefaultsNamespace(&list.Items[i])
		}
	})
	scheme.AddTypeDefaultingFunc(&corev1.Node{}, func(obj interface{}) { SetDefaultsNode(obj.(*corev1.Node)) })
	scheme.AddTypeDefaultingFunc(&corev1.NodeList{}, func(obj interface{}) {
		list := obj.(*corev1.NodeList)
		for i := range list.Items {
			SetDefaultsNode(&list.Items[i])
		}
	})
	scheme.AddTypeDefaultingFunc(&schedulingv1beta1.PodGroup{}, func(obj interface{}) { SetDefaultsPodGroup(obj.(*schedulingv1beta1.PodGroup)) })
	scheme.AddTypeDefaultingFunc(&schedulingv1beta1.PodGroupList{}, func(obj interface{}) {
		list := obj.(*schedulingv1beta1.PodGroupList)
		for i := range list.Items {
			SetDefaultsPodGroup(&list.Items[i])
		}
	})
	return nil
}

// SetDefaultsPodGroup gives a PodGroup without a disruption mode the
// "single" mode, upstream's default.
func SetDefaultsPodGroup(group *schedulingv1beta1.PodGroup) {
	if group.Spec.DisruptionMode == nil {
		group.Spec.DisruptionMode = &schedulingv1beta1.DisruptionMode{Single: &schedulingv1beta1.SingleDisruptionMode{}}
	}
}

// DefaultSchedulerName is the scheduler a pod gets when it names none.
const DefaultSchedulerName = "default-scheduler"

// SetDefaultsPod fills in the fields the kube-apiserver defaults for a v1 Pod.
// spec.priority and spec.preemptionPolicy are left to the Priority admission
// (package priorityclass), which derives them from the pod's PriorityClass:
// defaulting them here, before admission, would make every pod that names a
// class disagree with it.
func SetDefaultsPod(pod *corev1.Pod) {
	spec := &pod.Spec
	if spec.DNSPolicy == "" {
		spec.DNSPolicy = corev1.DNSClusterFirst
	}
	if spec.RestartPolicy == "" {
		spec.RestartPolicy = corev1.RestartPolicyAlways
	}
	if spec.TerminationGracePeriodSeconds == nil {
		spec.TerminationGracePeriodSeconds = ptr.To[int64](corev1.DefaultTerminationGracePeriodSeconds)
	}
	if spec.SecurityContext == nil {
		spec.SecurityContext = &corev1.PodSecurityContext{}
	}
	if spec.SchedulerName == "" {
		spec.SchedulerName = DefaultSchedulerName
	}
	if spec.EnableServiceLinks == nil {
		spec.EnableServiceLinks = ptr.To(corev1.DefaultEnableServiceLinks)
	}
	for i := range spec.InitContainers {
		setDefaultsContainer(&spec.InitContainers[i], spec.HostNetwork)
	}
	for i := range spec.Containers {
		setDefaultsContainer(&spec.Containers[i], spec.HostNetwork)
	}
	for i := range spec.EphemeralContainers {
		c := &spec.EphemeralContainers[i].EphemeralContainerCommon
		if c.TerminationMessagePath == "" {
			c.TerminationMessagePath = corev1.TerminationMessagePathDefault
		}
		if c.TerminationMessagePolicy == "" {
			c.TerminationMessagePolicy = corev1.TerminationMessageReadFile
		}
		if c.ImagePullPolicy == "" {
			c.ImagePullPolicy = DefaultImagePullPolicy(c.Image)
		}
	}
	for i := range spec.Volumes {
		setDefaultsVolume(&spec.Volumes[i])
	}
}

func setDefaultsContainer(c *corev1.Container, hostNetwork bool) {
	if c.TerminationMessagePath == "" {
		c.TerminationMessagePath = corev1.TerminationMessagePathDefault
	}
	if c.TerminationMessagePolicy == "" {
		c.TerminationMessagePolicy = corev1.TerminationMessageReadFile
	}
	if c.ImagePullPolicy == "" {
		c.ImagePullPolicy = DefaultImagePullPolicy(c.Image)
	}
	for i := range c.Ports {
		port := &c.Ports[i]
		if port.Protocol == "" {
			port.Protocol = corev1.ProtocolTCP
		}
		if hostNetwork && port.HostPort == 0 {
			port.HostPort = port.ContainerPort
		}
	}
	// A limit without a request means "request what you limit".
	for name, limit := range c.Resources.Limits {
		if _, ok := c.Resources.Requests[name]; ok {
			continue
		}
		if c.Resources.Requests == nil {
			c.Resources.Requests = corev1.ResourceList{}
		}
		c.Resources.Requests[name] = limit.DeepCopy()
	}
}

func setDefaultsVolume(v *corev1.Volume) {
	src := &v.VolumeSource
	if *src == (corev1.VolumeSource{}) {
		src.EmptyDir = &corev1.EmptyDirVolumeSource{}
	}
	const defaultMode = int32(0644)
	switch {
	case src.Secret != nil && src.Secret.DefaultMode == nil:
		src.Secret.DefaultMode = ptr.To(defaultMode)
	case src.ConfigMap != nil && src.ConfigMap.DefaultMode == nil:
		src.ConfigMap.DefaultMode = ptr.To(defaultMode)
	case src.DownwardAPI != nil && src.DownwardAPI.DefaultMode == nil:
		src.DownwardAPI.DefaultMode = ptr.To(defaultMode)
	case src.Projected != nil && src.Projected.DefaultMode == nil:
		src.Projected.DefaultMode = ptr.To(defaultMode)
	}
}

// DefaultImagePullPolicy is Always for an image without a tag or tagged
// "latest", IfNotPresent otherwise (also for images pinned by digest).
func DefaultImagePullPolicy(image string) corev1.PullPolicy {
	if strings.Contains(image, "@") {
		return corev1.PullIfNotPresent
	}
	tag := ""
	lastSlash := strings.LastIndex(image, "/")
	if colon := strings.LastIndex(image, ":"); colon > lastSlash {
		tag = image[colon+1:]
	}
	if tag == "" || tag == "latest" {
		return corev1.PullAlways
	}
	return corev1.PullIfNotPresent
}

// SetDefaultsNamespace gives a namespace without a phase the Active phase.
func SetDefaultsNamespace(ns *corev1.Namespace) {
	if ns.Status.Phase == "" {
		ns.Status.Phase = corev1.NamespaceActive
	}
}

// SetDefaultsNode makes a node's allocatable resources default to its
// capacity, as the kube-apiserver does.
func SetDefaultsNode(node *corev1.Node) {
	if node.Status.Allocatable == nil && node.Status.Capacity != nil {
		node.Status.Allocatable = node.Status.Capacity.DeepCopy()
	}
}

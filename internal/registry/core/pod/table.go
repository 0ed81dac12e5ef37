package pod

import (
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/draplane/draplane/internal/registry/internal/table"
)

var podSpecDescriptions = corev1.PodSpec{}.SwaggerDoc()

var tableConvertor = table.Convertor[*corev1.Pod]{
	Columns: []metav1.TableColumnDefinition{
		table.NameColumn,
		{Name: "Ready", Type: "string", Description: "The aggregate readiness state of this pod for accepting traffic."},
		{Name: "Status", Type: "string", Description: "The aggregate status of the containers in this pod."},
		{Name: "Restarts", Type: "string", Description: "The number of times the containers in this pod have been restarted."},
		table.AgeColumn,
		// Unlike kubectl's default, the node is shown without -o wide: which
		// node a pod was bound to is what DRA users look for first.
		{Name: "Node", Type: "string", Description: podSpecDescriptions["nodeName"]},
		{Name: "IP", Type: "string", Priority: 1, Description: corev1.PodStatus{}.SwaggerDoc()["podIP"]},
		{Name: "Nominated Node", Type: "string", Priority: 1, Description: corev1.PodStatus{}.SwaggerDoc()["nominatedNodeName"]},
	},
	Row: func(pod *corev1.Pod) []interface{} {
		ready, restarts := 0, int32(0)
		for _, status := range pod.Status.ContainerStatuses {
			restarts += status.RestartCount
			if status.Ready && status.State.Running != nil {
				ready++
			}
		}
		return []interface{}{
			pod.Name,
			fmt.Sprintf("%d/%d", ready, len(pod.Spec.Containers)),
			podStatusReason(pod),
			strconv.Itoa(int(restarts)),
			table.Age(pod.CreationTimestamp),
			orNone(pod.Spec.NodeName),
			orNone(pod.Status.PodIP),
			orNone(pod.Status.NominatedNodeName),
		}
	},
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

// podStatusReason summarises a pod in one word, as kubectl's STATUS column.
func podStatusReason(pod *corev1.Pod) string {
	reason := string(pod.Status.Phase)
	if pod.Status.Reason != "" {
		reason = pod.Status.Reason
	}
	if pod.Status.Phase == corev1.PodPending && len(pod.Spec.SchedulingGates) > 0 {
		reason = "SchedulingGated"
	}
	for i, status := range pod.Status.InitContainerStatuses {
		switch {
		case status.State.Terminated != nil && status.State.Terminated.ExitCode == 0:
			continue
		case status.State.Terminated != nil && status.State.Terminated.Reason != "":
			reason = "Init:" + status.State.Terminated.Reason
		case status.State.Terminated != nil:
			reason = fmt.Sprintf("Init:ExitCode:%d", status.State.Terminated.ExitCode)
		case status.State.Waiting != nil && status.State.Waiting.Reason != "" && status.State.Waiting.Reason != "PodInitializing":
			reason = "Init:" + status.State.Waiting.Reason
		case status.State.Running != nil && isSidecar(pod, status.Name):
			continue
		default:
			reason = fmt.Sprintf("Init:%d/%d", i, len(pod.Spec.InitContainers))
		}
		return withDeletion(pod, reason)
	}
	hasRunning := false
	for i := len(pod.Status.ContainerStatuses) - 1; i >= 0; i-- {
		status := pod.Status.ContainerStatuses[i]
		switch {
		case status.State.Waiting != nil && status.State.Waiting.Reason != "":
			reason = status.State.Waiting.Reason
		case status.State.Terminated != nil && status.State.Terminated.Reason != "":
			reason = status.State.Terminated.Reason
		case status.State.Terminated != nil && status.State.Terminated.Signal != 0:
			reason = fmt.Sprintf("Signal:%d", status.State.Terminated.Signal)
		case status.State.Terminated != nil:
			reason = fmt.Sprintf("ExitCode:%d", status.State.Terminated.ExitCode)
		case status.Ready && status.State.Running != nil:
			hasRunning = true
		}
	}
	if reason == "Completed" && hasRunning {
		reason = "NotReady"
		for _, condition := range pod.Status.Conditions {
			if condition.Type == corev1.PodReady && condition.Status == corev1.ConditionTrue {
				reason = string(corev1.PodRunning)
			}
		}
	}
	return withDeletion(pod, reason)
}

func isSidecar(pod *corev1.Pod, name string) bool {
	for _, c := range pod.Spec.InitContainers {
		if c.Name == name {
			return c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
		}
	}
	return false
}

func withDeletion(pod *corev1.Pod, reason string) string {
	if pod.DeletionTimestamp == nil {
		return reason
	}
	if pod.Status.Reason == "NodeLost" {
		return "Unknown"
	}
	return "Terminating"
}

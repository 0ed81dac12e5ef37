package nodeagent

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
)

// ReasonAgentReady is the reason of the Ready condition a node agent
// reports for its node.
const ReasonAgentReady = "NodeAgentReady"

// RegisterNode makes sure the node exists, with the hostname label, and
// reports it Ready, as a kubelet registers its node. It returns the node.
func RegisterNode(ctx context.Context, client kubernetes.Interface, name, agent string) (*corev1.Node, error) {
	nodes := client.CoreV1().Nodes()
	node, err := nodes.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		now := metav1.Now()
		node, err = nodes.Create(ctx, &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: name}},
			Status:     corev1.NodeStatus{Conditions: []corev1.NodeCondition{readyCondition(agent, now, now)}},
		}, metav1.CreateOptions{FieldManager: agent})
		if err == nil {
			return node, nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("register node %s: %w", name, err)
		}
		node, err = nodes.Get(ctx, name, metav1.GetOptions{})
	}
	if err != nil {
		return nil, fmt.Errorf("get node %s: %w", name, err)
	}
	return reportReady(ctx, client, node, agent)
}

// KeepReady renews the node's Ready condition every interval, starting
// one interval from now (callers register the node first), and registers
// the node again if it was deleted, until ctx is done.
func KeepReady(ctx context.Context, client kubernetes.Interface, name, agent string, interval time.Duration) {
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
		if _, err := RegisterNode(ctx, client, name, agent); err != nil && ctx.Err() == nil {
			klog.FromContext(ctx).Error(err, "Node heartbeat failed", "node", name)
		}
	}
}

func readyCondition(agent string, heartbeat, transition metav1.Time) corev1.NodeCondition {
	return corev1.NodeCondition{
		Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: ReasonAgentReady,
		Message:           agent + " is running on the node",
		LastHeartbeatTime: heartbeat, LastTransitionTime: transition,
	}
}

// reportReady writes a Ready condition with a fresh heartbeat, keeping
// its transition time while it stays True.
func reportReady(ctx context.Context, client kubernetes.Interface, node *corev1.Node, agent string) (*corev1.Node, error) {
	node = node.DeepCopy()
	now := metav1.Now()
	ready := readyCondition(agent, now, now)
	found := false
	for i := range node.Status.Conditions {
		c := &node.Status.Conditions[i]
		if c.Type != corev1.NodeReady {
			continue
		}
		if c.Status == corev1.ConditionTrue {
			ready.LastTransitionTime = c.LastTransitionTime
		}
		*c, found = ready, true
	}
	if !found {
		node.Status.Conditions = append(node.Status.Conditions, ready)
	}
	updated, err := client.CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{FieldManager: agent})
	if err != nil {
		return nil, fmt.Errorf("report node %s ready: %w", node.Name, err)
	}
	return updated, nil
}

// SetAllocatable writes the node's capacity and allocatable, as a kubelet
// reports what the machine has: a scheduler that checks pods' requests
// against them (kube-scheduler, or draplane placing a host cluster's pods)
// finds room for no pod on a node without them.
func SetAllocatable(ctx context.Context, client kubernetes.Interface, name, agent string, allocatable corev1.ResourceList) error {
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"capacity": allocatable, "allocatable": allocatable}})
	if err != nil {
		return err
	}
	if _, err := client.CoreV1().Nodes().Patch(ctx, name, types.StrategicMergePatchType, patch, metav1.PatchOptions{FieldManager: agent}, "status"); err != nil {
		return fmt.Errorf("report allocatable of node %s: %w", name, err)
	}
	return nil
}

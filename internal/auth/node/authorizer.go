package node

import (
	"context"
	"fmt"
	"slices"

	schedulingv1beta1 "k8s.io/api/scheduling/v1beta1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	corelisters "k8s.io/client-go/listers/core/v1"

	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
	resourcelisters "github.com/draplane/draplane/generated/listers/resource/v1"
)

var resourceGroups = []string{"resource.draplane.dev", "resource.k8s.io"}

// Authorizer denies a node-bound identity what concerns another node's
// objects and has no opinion on everything else (RBAC decides). It reads
// claims and pods from informer caches.
type Authorizer struct {
	Claims resourcelisters.ResourceClaimLister
	Pods   corelisters.PodLister
}

var _ authorizer.Authorizer = (*Authorizer)(nil)

func deny(format string, args ...any) (authorizer.Decision, string, error) {
	return authorizer.DecisionDeny, "node restriction: " + fmt.Sprintf(format, args...), nil
}

// Authorize implements authorizer.Authorizer.
func (a *Authorizer) Authorize(ctx context.Context, attrs authorizer.Attributes) (authorizer.Decision, string, error) {
	node, ok := Identify(attrs.GetUser())
	if !ok || !attrs.IsResourceRequest() {
		return authorizer.DecisionNoOpinion, "", nil
	}
	who := attrs.GetUser().GetName()
	group, resource, sub, verb := attrs.GetAPIGroup(), attrs.GetResource(), attrs.GetSubresource(), attrs.GetVerb()
	namespace, name := attrs.GetNamespace(), attrs.GetName()
	switch {
	case slices.Contains(resourceGroups, group) && resource == "resourceclaims" && (sub == "" || sub == "status"):
		if name == "" {
			return deny("%s may only get ResourceClaims allocated on node %s, one by name", who, node)
		}
		claim, err := a.Claims.ResourceClaims(namespace).Get(name)
		if apierrors.IsNotFound(err) {
			return deny("%s may only read and write ResourceClaims allocated on node %s; claim %s/%s does not exist", who, node, namespace, name)
		}
		if err != nil {
			return authorizer.DecisionNoOpinion, "", err
		}
		if !claimOnNode(claim, node) {
			return deny("%s may only read and write ResourceClaims allocated on node %s; claim %s/%s is not", who, node, namespace, name)
		}
		if claim.Status.Allocation.NodeSelector == nil {
			used, err := a.usedOnNode(claim, node)
			if err != nil {
				return authorizer.DecisionNoOpinion, "", err
			}
			if !used {
				return deny("%s may only read and write ResourceClaims without a node selector that a pod on node %s uses; claim %s/%s is used by no pod on it", who, node, namespace, name)
			}
		}
	case slices.Contains(resourceGroups, group) && resource == "resourceslices" && verb == "deletecollection":
		if !selectsNode(attrs, node) {
			return deny("%s may only delete the ResourceSlices of node %s as a collection with the field selector spec.nodeName=%s", who, node, node)
		}
	case group == "" && resource == "nodes" && slices.Contains([]string{"update", "patch", "delete"}, verb):
		if name != node {
			return deny("%s may only write its own Node %s, not %s", who, node, name)
		}
	case group == "" && resource == "pods" && sub == "status" && verb != "get":
		pod, err := a.Pods.Pods(namespace).Get(name)
		if apierrors.IsNotFound(err) {
			return deny("%s may only write the status of pods bound to node %s; pod %s/%s does not exist", who, node, namespace, name)
		}
		if err != nil {
			return authorizer.DecisionNoOpinion, "", err
		}
		if pod.Spec.NodeName != node {
			return deny("%s may only write the status of pods bound to node %s; pod %s/%s is not", who, node, namespace, name)
		}
	}
	return authorizer.DecisionNoOpinion, "", nil
}

// usedOnNode reports whether the claim is reserved for a pod bound to
// node, or for a PodGroup that has a pod bound to node. A claim whose
// devices are reachable from every node (no node selector) is usable on
// every node, but only the nodes of its consumers have any business with
// it, as upstream's Node authorizer lets a kubelet read only the claims of
// its pods.
func (a *Authorizer) usedOnNode(claim *resourcev1.ResourceClaim, node string) (bool, error) {
	var groups []string
	for _, consumer := range claim.Status.ReservedFor {
		switch {
		case consumer.APIGroup == "" && consumer.Resource == "pods":
			pod, err := a.Pods.Pods(claim.Namespace).Get(consumer.Name)
			if apierrors.IsNotFound(err) {
				continue
			}
			if err != nil {
				return false, err
			}
			if pod.UID == consumer.UID && pod.Spec.NodeName == node {
				return true, nil
			}
		case consumer.APIGroup == schedulingv1beta1.GroupName && consumer.Resource == "podgroups":
			groups = append(groups, consumer.Name)
		}
	}
	if len(groups) == 0 {
		return false, nil
	}
	pods, err := a.Pods.Pods(claim.Namespace).List(labels.Everything())
	if err != nil {
		return false, err
	}
	for _, pod := range pods {
		if group := pod.Spec.SchedulingGroup; pod.Spec.NodeName == node && group != nil && group.PodGroupName != nil && slices.Contains(groups, *group.PodGroupName) {
			return true, nil
		}
	}
	return false, nil
}

// selectsNode reports whether a request's field selector limits it to
// spec.nodeName=node.
func selectsNode(attrs authorizer.Attributes, node string) bool {
	requirements, err := attrs.GetFieldSelector()
	if err != nil {
		return false
	}
	for _, r := range requirements {
		if r.Field == "spec.nodeName" && (r.Operator == selection.Equals || r.Operator == selection.DoubleEquals) && r.Value == node {
			return true
		}
	}
	return false
}

// ConditionsAwareAuthorize implements authorizer.Authorizer.
func (a *Authorizer) ConditionsAwareAuthorize(ctx context.Context, attrs authorizer.Attributes) authorizer.ConditionsAwareDecision {
	return authorizer.ConditionsAwareDecisionFromParts(a.Authorize(ctx, attrs))
}

// EvaluateConditions implements authorizer.Authorizer.
func (a *Authorizer) EvaluateConditions(context.Context, authorizer.ConditionsAwareDecision, authorizer.ConditionsData) (authorizer.Decision, string, error) {
	return authorizer.DecisionDeny, "", authorizer.ErrorConditionEvaluationNotSupported
}

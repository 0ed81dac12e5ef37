// Package clusterroleaggregation fills the rules of ClusterRoles that have
// an aggregationRule with the rules of every ClusterRole its selectors
// match, as upstream's clusterrole-aggregation controller: admin, edit and
// view grow by labelling a ClusterRole aggregate-to-admin, -edit or -view.
package clusterroleaggregation

import (
	"context"
	"fmt"
	"sort"

	rbacv1 "k8s.io/api/rbac/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	rbacinformers "k8s.io/client-go/informers/rbac/v1"
	rbacclient "k8s.io/client-go/kubernetes/typed/rbac/v1"
	rbaclisters "k8s.io/client-go/listers/rbac/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"

	"github.com/draplane/draplane/internal/worker"
)

// ControllerName names the controller in logs and its work queue.
const ControllerName = "clusterrole-aggregation-controller"

// Controller keeps aggregated ClusterRoles' rules up to date.
type Controller struct {
	client rbacclient.ClusterRolesGetter
	lister rbaclisters.ClusterRoleLister
	synced cache.InformerSynced
	queue  workqueue.TypedRateLimitingInterface[string]
}

// NewController wires the ClusterRole informer. Call it before starting
// the informer factory.
func NewController(logger klog.Logger, client rbacclient.ClusterRolesGetter, informer rbacinformers.ClusterRoleInformer) (*Controller, error) {
	c := &Controller{
		client: client,
		lister: informer.Lister(),
		synced: informer.Informer().HasSynced,
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: ControllerName},
		),
	}
	// Any change may change what some aggregated role gathers; there are
	// few aggregated roles, so every one of them is looked at again.
	enqueueAll := func(any) { c.enqueueAggregated() }
	_, err := informer.Informer().AddEventHandlerWithOptions(cache.ResourceEventHandlerFuncs{
		AddFunc:    enqueueAll,
		UpdateFunc: func(_, obj any) { enqueueAll(obj) },
		DeleteFunc: enqueueAll,
	}, cache.HandlerOptions{Logger: &logger})
	if err != nil {
		return nil, fmt.Errorf("add clusterrole event handler: %w", err)
	}
	return c, nil
}

func (c *Controller) enqueueAggregated() {
	roles, err := c.lister.List(labels.Everything())
	if err != nil {
		return
	}
	for _, role := range roles {
		if role.AggregationRule != nil {
			c.queue.Add(role.Name)
		}
	}
}

// Run waits for the informer and runs workers until ctx ends.
func (c *Controller) Run(ctx context.Context, workers int) {
	logger := klog.FromContext(ctx)
	logger.Info("Starting controller", "controller", ControllerName)
	defer logger.Info("Shutting down controller", "controller", ControllerName)
	worker.Run(ctx, c.queue, workers, c.handle, c.synced)
}

func (c *Controller) handle(ctx context.Context, name string) {
	worker.Requeue(ctx, c.queue, name, 0, c.sync(ctx, name), "Aggregating ClusterRole failed", "clusterRole")
}

// sync sets the rules of one aggregated ClusterRole to the union of the
// rules of the roles its selectors match (in name order, each rule once).
func (c *Controller) sync(ctx context.Context, name string) error {
	role, err := c.lister.Get(name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if role.AggregationRule == nil {
		return nil
	}
	rules, err := c.aggregatedRules(role)
	if err != nil {
		return err
	}
	if apiequality.Semantic.DeepEqual(rules, role.Rules) || (len(rules) == 0 && len(role.Rules) == 0) {
		return nil
	}
	updated := role.DeepCopy()
	updated.Rules = rules
	_, err = c.client.ClusterRoles().Update(ctx, updated, metav1.UpdateOptions{FieldManager: ControllerName})
	if err == nil {
		klog.FromContext(ctx).V(2).Info("Aggregated ClusterRole", "clusterRole", name, "rules", len(rules))
	}
	return err
}

func (c *Controller) aggregatedRules(role *rbacv1.ClusterRole) ([]rbacv1.PolicyRule, error) {
	matched := map[string]*rbacv1.ClusterRole{}
	for i := range role.AggregationRule.ClusterRoleSelectors {
		selector, err := metav1.LabelSelectorAsSelector(&role.AggregationRule.ClusterRoleSelectors[i])
		if err != nil {
			// Validation refused such a selector; nothing to retry.
			return nil, nil
		}
		roles, err := c.lister.List(selector)
		if err != nil {
			return nil, err
		}
		for _, r := range roles {
			if r.Name != role.Name {
				matched[r.Name] = r
			}
		}
	}
	names := make([]string, 0, len(matched))
	for name := range matched {
		names = append(names, name)
	}
	sort.Strings(names)
	var rules []rbacv1.PolicyRule
	for _, name := range names {
		for _, rule := range matched[name].Rules {
			if !containsRule(rules, rule) {
				rules = append(rules, rule)
			}
		}
	}
	return rules, nil
}

func containsRule(rules []rbacv1.PolicyRule, rule rbacv1.PolicyRule) bool {
	for _, r := range rules {
		if apiequality.Semantic.DeepEqual(r, rule) {
			return true
		}
	}
	return false
}

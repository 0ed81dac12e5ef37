package pod

import (
	"context"
	"fmt"
	"net/http"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/registry/generic"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/apiserver/pkg/storage"
	storeerr "k8s.io/apiserver/pkg/storage/errors"
	"k8s.io/klog/v2"

	"github.com/draplane/draplane/internal/registry/internal/statusrest"
	"github.com/draplane/draplane/internal/registry/patcherrors"
)

// REST serves pods.
type REST struct {
	patcherrors.Store
}

// StatusREST serves the status subresource.
type StatusREST = statusrest.REST

// BindingREST serves the binding subresource, which assigns a pod to a node.
type BindingREST struct {
	store *genericregistry.Store
}

// EvictionREST serves the eviction subresource. There are no
// PodDisruptionBudgets here, so an eviction is a deletion with the
// eviction's delete options.
type EvictionREST struct {
	store *genericregistry.Store
}

// Storage holds the pod resource and its subresources.
type Storage struct {
	Pod      *REST
	Status   *StatusREST
	Binding  *BindingREST
	Eviction *EvictionREST
}

// NewStorage returns the storage of pods and their subresources.
func NewStorage(optsGetter generic.RESTOptionsGetter) (*Storage, error) {
	store := &genericregistry.Store{
		NewFunc:                   func() runtime.Object { return &corev1.Pod{} },
		NewListFunc:               func() runtime.Object { return &corev1.PodList{} },
		DefaultQualifiedResource:  corev1.Resource("pods"),
		SingularQualifiedResource: corev1.Resource("pod"),
		PredicateFunc:             Matcher,
		CreateStrategy:            Strategy,
		UpdateStrategy:            Strategy,
		DeleteStrategy:            Strategy,
		ResetFieldsStrategy:       Strategy,
		ReturnDeletedObject:       true,
		TableConvertor:            tableConvertor,
	}
	options := &generic.StoreOptions{
		RESTOptions: optsGetter,
		AttrFunc:    GetAttrs,
		TriggerFunc: map[string]storage.IndexerFunc{"spec.nodeName": NodeNameTriggerFunc},
		Indexers:    Indexers(),
	}
	if err := store.CompleteWithOptions(options); err != nil {
		return nil, err
	}
	statusStore := *store
	statusStore.UpdateStrategy = StatusStrategy
	statusStore.ResetFieldsStrategy = StatusStrategy
	return &Storage{
		Pod:      &REST{Store: patcherrors.Store{Store: store}},
		Status:   statusrest.New(&statusStore),
		Binding:  &BindingREST{store},
		Eviction: &EvictionREST{store},
	}, nil
}

// ShortNames implements rest.ShortNamesProvider.
func (r *REST) ShortNames() []string { return []string{"po"} }

// Categories implements rest.CategoriesProvider.
func (r *REST) Categories() []string { return []string{"all"} }

// Delete deletes a pod, gracefully if it is bound to a node.
func (r *REST) Delete(ctx context.Context, name string, deleteValidation rest.ValidateObjectFunc, options *metav1.DeleteOptions) (runtime.Object, bool, error) {
	return r.Store.Delete(withRequestedGracePeriod(ctx, options), name, deleteValidation, options)
}

// DeleteCollection deletes pods, each gracefully if it is bound to a node.
func (r *REST) DeleteCollection(ctx context.Context, deleteValidation rest.ValidateObjectFunc, options *metav1.DeleteOptions, listOptions *metainternalversion.ListOptions) (runtime.Object, error) {
	return r.Store.DeleteCollection(withRequestedGracePeriod(ctx, options), deleteValidation, options, listOptions)
}

var _ rest.NamedCreater = &BindingREST{}

// New returns an empty binding.
func (r *BindingREST) New() runtime.Object { return &corev1.Binding{} }

// Destroy does nothing: the main store owns the storage.
func (r *BindingREST) Destroy() {}

// Create binds the pod named in the URL to binding.target.name.
func (r *BindingREST) Create(ctx context.Context, name string, obj runtime.Object, createValidation rest.ValidateObjectFunc, options *metav1.CreateOptions) (runtime.Object, error) {
	binding, ok := obj.(*corev1.Binding)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("not a Binding object: %T", obj))
	}
	if binding.Name != name {
		return nil, apierrors.NewBadRequest("name in URL does not match name in Binding object")
	}
	if errs := validateBinding(binding); len(errs) > 0 {
		return nil, apierrors.NewInvalid(corev1.SchemeGroupVersion.WithKind("Binding").GroupKind(), binding.Name, errs)
	}
	if createValidation != nil {
		if err := createValidation(ctx, binding.DeepCopyObject()); err != nil {
			return nil, err
		}
	}
	dryRun := options != nil && len(options.DryRun) > 0
	if err := r.bind(ctx, binding, dryRun); err != nil {
		return nil, err
	}
	return &metav1.Status{Status: metav1.StatusSuccess, Code: http.StatusCreated}, nil
}

func validateBinding(binding *corev1.Binding) field.ErrorList {
	var allErrs field.ErrorList
	targetPath := field.NewPath("target")
	if binding.Target.Kind != "" && binding.Target.Kind != "Node" {
		allErrs = append(allErrs, field.NotSupported(targetPath.Child("kind"), binding.Target.Kind, []string{"Node", "<empty>"}))
	}
	if binding.Target.Name == "" {
		allErrs = append(allErrs, field.Required(targetPath.Child("name"), ""))
	} else {
		allErrs = append(allErrs, validateDNSSubdomain(binding.Target.Name, targetPath.Child("name"))...)
	}
	return allErrs
}

// bind sets spec.nodeName once, records the PodScheduled condition and
// copies the binding's annotations onto the pod.
func (r *BindingREST) bind(ctx context.Context, binding *corev1.Binding, dryRun bool) error {
	key, err := r.store.KeyFunc(ctx, binding.Name)
	if err != nil {
		return err
	}
	var preconditions *storage.Preconditions
	if binding.UID != "" || binding.ResourceVersion != "" {
		preconditions = &storage.Preconditions{}
		if binding.UID != "" {
			preconditions.UID = &binding.UID
		}
		if binding.ResourceVersion != "" {
			preconditions.ResourceVersion = &binding.ResourceVersion
		}
	}
	nodeName := binding.Target.Name
	err = r.store.Storage.GuaranteedUpdate(ctx, key, &corev1.Pod{}, false, preconditions,
		storage.SimpleUpdate(func(obj runtime.Object) (runtime.Object, error) {
			pod := obj.(*corev1.Pod)
			switch {
			case pod.DeletionTimestamp != nil:
				return nil, apierrors.NewConflict(corev1.Resource("pods/binding"), pod.Name, fmt.Errorf("pod %s is being deleted, cannot be assigned to a host", pod.Name))
			case pod.Spec.NodeName != "":
				return nil, apierrors.NewConflict(corev1.Resource("pods/binding"), pod.Name, fmt.Errorf("pod %s is already assigned to node %q", pod.Name, pod.Spec.NodeName))
			case len(pod.Spec.SchedulingGates) > 0:
				return nil, apierrors.NewConflict(corev1.Resource("pods/binding"), pod.Name, fmt.Errorf("pod %s has non-empty .spec.schedulingGates", pod.Name))
			}
			pod.Spec.NodeName = nodeName
			if len(binding.Annotations) > 0 && pod.Annotations == nil {
				pod.Annotations = map[string]string{}
			}
			for k, v := range binding.Annotations {
				pod.Annotations[k] = v
			}
			setCondition(&pod.Status, corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionTrue})
			return pod, nil
		}), dryRun, nil)
	if err != nil {
		return storeerr.InterpretUpdateError(err, corev1.Resource("pods"), binding.Name)
	}
	klog.FromContext(ctx).V(4).Info("Bound pod", "pod", klog.KRef(binding.Namespace, binding.Name), "node", nodeName)
	return nil
}

// setCondition adds or replaces the condition of the same type, moving the
// transition time only when the status changes.
func setCondition(status *corev1.PodStatus, condition corev1.PodCondition) {
	now := metav1.Now()
	condition.LastProbeTime = metav1.Time{}
	for i := range status.Conditions {
		existing := &status.Conditions[i]
		if existing.Type != condition.Type {
			continue
		}
		if existing.Status == condition.Status {
			condition.LastTransitionTime = existing.LastTransitionTime
		} else {
			condition.LastTransitionTime = now
		}
		*existing = condition
		return
	}
	condition.LastTransitionTime = now
	status.Conditions = append(status.Conditions, condition)
}

var _ rest.NamedCreater = &EvictionREST{}
var _ rest.GroupVersionKindProvider = &EvictionREST{}

// New returns an empty eviction.
func (r *EvictionREST) New() runtime.Object { return &policyv1.Eviction{} }

// Destroy does nothing: the main store owns the storage.
func (r *EvictionREST) Destroy() {}

// GroupVersionKind tells discovery that the body is a policy/v1 Eviction.
func (r *EvictionREST) GroupVersionKind(containingGV schema.GroupVersion) schema.GroupVersionKind {
	return policyv1.SchemeGroupVersion.WithKind("Eviction")
}

// Create evicts the pod named in the URL: it deletes it with the eviction's
// delete options, so a bound pod goes through graceful deletion.
func (r *EvictionREST) Create(ctx context.Context, name string, obj runtime.Object, createValidation rest.ValidateObjectFunc, options *metav1.CreateOptions) (runtime.Object, error) {
	eviction, ok := obj.(*policyv1.Eviction)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("not an Eviction object: %T", obj))
	}
	if eviction.Name != name {
		return nil, apierrors.NewBadRequest("name in URL does not match name in Eviction object")
	}
	if createValidation != nil {
		if err := createValidation(ctx, eviction.DeepCopyObject()); err != nil {
			return nil, err
		}
	}
	deleteOptions := &metav1.DeleteOptions{}
	if eviction.DeleteOptions != nil {
		deleteOptions = eviction.DeleteOptions.DeepCopy()
	}
	if options != nil && len(options.DryRun) > 0 {
		deleteOptions.DryRun = options.DryRun
	}
	if _, _, err := r.store.Delete(withRequestedGracePeriod(ctx, deleteOptions), name, rest.ValidateAllObjectFunc, deleteOptions); err != nil {
		return nil, err
	}
	klog.FromContext(ctx).V(4).Info("Evicted pod", "pod", klog.KRef(eviction.Namespace, name))
	return &metav1.Status{Status: metav1.StatusSuccess, Code: http.StatusCreated}, nil
}

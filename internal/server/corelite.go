package server

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/admission/plugin/namespace/lifecycle"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/registry/generic"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"

	resourceinformers "github.com/draplane/draplane/generated/informers/externalversions"
	"github.com/draplane/draplane/internal/auth/node"
	"github.com/draplane/draplane/internal/controllermanager"
	"github.com/draplane/draplane/internal/controllers/namespace"
	"github.com/draplane/draplane/internal/inprocess"
	"github.com/draplane/draplane/internal/registry/core"
)

// bootstrapNamespaces exist from the first start on and cannot be deleted.
var bootstrapNamespaces = []string{metav1.NamespaceDefault, metav1.NamespaceSystem}

func addCoreLiteToScheme(scheme *runtime.Scheme) error { return core.AddToScheme(scheme) }

// CoreLite is what serving core-lite needs besides storage: clients and
// informers over the loopback connection, shared by the admission plugin
// and the namespace controller.
type CoreLite struct {
	client        kubernetes.Interface
	dynamicClient dynamic.Interface
	auth          *coreLiteAuth
	// informers are the process's shared informers (InProcess): the
	// namespaces, RBAC objects, priority classes and pods that core-lite
	// reads are cached once, beside the controllers' own use of them.
	informers informers.SharedInformerFactory
	// resourceInformers feed the node authorizer's claim cache, shared
	// with the controllers too.
	resourceInformers resourceinformers.SharedInformerFactory
}

// NewCoreLite builds the loopback clients and the admission chain: the
// NamespaceLifecycle plugin (no object may be created in a namespace that
// does not exist or is being deleted), the Priority admission of new
// pods (package priorityclass) and nodeRestriction (auth/node). The chain
// handles creates and deletes only: were it to handle updates, the API
// handlers would decode every update's managedFields again after mutating
// admission. The node restriction's checks of updates run in the stores
// of resourceslices and resourceclaims/status (ExtraConfig.NodeRestriction).
// Everything core-lite watches comes from shared, the process's shared
// informers (InProcess.Informers).
func NewCoreLite(loopback *rest.Config, shared *inprocess.Informers, nodeRestriction *node.Admission) (*CoreLite, admission.Interface, error) {
	// Protobuf without gzip, as the other clients in the process (the
	// namespace and ClusterRole aggregation controllers, bootstrap, the
	// NamespaceLifecycle plugin's lookups).
	loopback = inprocess.InProcessConfig(loopback)
	client, err := kubernetes.NewForConfig(loopback)
	if err != nil {
		return nil, nil, fmt.Errorf("loopback client: %w", err)
	}
	dynamicClient, err := dynamic.NewForConfig(loopback)
	if err != nil {
		return nil, nil, fmt.Errorf("loopback dynamic client: %w", err)
	}
	c := &CoreLite{client: client, dynamicClient: dynamicClient, informers: shared.Kube, resourceInformers: shared.Resource}
	// The RBAC and node authorizers' informers are asked for before the
	// factories start.
	c.auth = newCoreLiteAuth(c)
	plugin, err := lifecycle.NewLifecycle(sets.New(bootstrapNamespaces...))
	if err != nil {
		return nil, nil, fmt.Errorf("namespace lifecycle admission: %w", err)
	}
	plugin.SetExternalKubeClientSet(client)
	plugin.SetExternalKubeInformerFactory(c.informers)
	if err := plugin.ValidateInitialization(); err != nil {
		return nil, nil, fmt.Errorf("namespace lifecycle admission: %w", err)
	}
	return c, admission.NewChainHandler(namespaceLifecycle{plugin}, c.priorityAdmission(), nodeRestriction), nil
}

// namespaceLifecycle is the NamespaceLifecycle plugin asked only about
// creates and deletes. The plugin allows every update without looking at
// it, so declining updates changes no answer; what it saves is the API
// handlers' check that mutating admission left an object's managedFields
// decodable, which decodes every managedFields entry again on each update
// and patch, though no plugin that could touch them ran.
type namespaceLifecycle struct {
	*lifecycle.Lifecycle
}

func (l namespaceLifecycle) Handles(operation admission.Operation) bool {
	return operation != admission.Update && l.Lifecycle.Handles(operation)
}

// install serves core/v1, coordination.k8s.io/v1, scheduling.k8s.io (v1
// PriorityClasses and, with the GenericWorkload gate, v1beta1 PodGroups)
// and the RBAC and self review groups (installAuth; authz is the server's
// whole authorizer) and adds the hooks that start the informers and
// create the bootstrap namespaces and the system priority classes. Its
// controllers, the namespace and ClusterRole aggregation controllers, go
// to manager, which runs them on every replica.
func (c *CoreLite) install(s *genericapiserver.GenericAPIServer, handlers handlerInstaller, scheme *runtime.Scheme, codecs serializer.CodecFactory, optsGetter generic.RESTOptionsGetter, authz authorizer.Authorizer, manager *controllermanager.ControllerManager) error {
	legacy, err := core.NewLegacyStorage(optsGetter)
	if err != nil {
		return fmt.Errorf("core/v1 storage: %w", err)
	}
	legacyInfo := newAPIGroupInfo("", scheme, codecs)
	legacyInfo.VersionedResourcesStorageMap["v1"] = legacy
	if err := handlers.install(s, genericapiserver.DefaultLegacyAPIPrefix, &legacyInfo); err != nil {
		return fmt.Errorf("install core/v1: %w", err)
	}

	coordination, err := core.NewCoordinationStorage(optsGetter)
	if err != nil {
		return fmt.Errorf("coordination.k8s.io/v1 storage: %w", err)
	}
	coordinationInfo := newAPIGroupInfo("coordination.k8s.io", scheme, codecs)
	coordinationInfo.VersionedResourcesStorageMap["v1"] = coordination
	if err := handlers.install(s, genericapiserver.APIGroupPrefix, &coordinationInfo); err != nil {
		return fmt.Errorf("install coordination.k8s.io/v1: %w", err)
	}
	if err := c.installScheduling(s, handlers, scheme, codecs, optsGetter); err != nil {
		return err
	}

	if err := c.installAuth(s, handlers, scheme, codecs, optsGetter, authz, manager); err != nil {
		return err
	}

	// The controller asks for its informer before the factory starts.
	namespaceInformer := c.informers.Core().V1().Namespaces()
	controller := namespace.NewController(klog.Background(), c.client, c.dynamicClient, c.client.Discovery(), namespaceInformer)
	// Not leader-elected: every replica deletes what is in a deleted
	// namespace, and their deletions of the same objects are idempotent.
	manager.AddEveryReplica("namespace-controller", 2, controller.Run)

	if err := s.AddPostStartHook("start-core-lite-informers", func(hook genericapiserver.PostStartHookContext) error {
		c.informers.Start(hook.Done())
		c.resourceInformers.Start(hook.Done())
		return nil
	}); err != nil {
		return err
	}
	return s.AddPostStartHook("bootstrap-namespaces", c.createBootstrapNamespaces)
}

// createBootstrapNamespaces creates default and kube-system. /readyz waits
// for it, so clients never see a server without them.
func (c *CoreLite) createBootstrapNamespaces(hook genericapiserver.PostStartHookContext) error {
	logger := klog.Background().WithName("bootstrap-namespaces")
	return wait.PollUntilContextTimeout(hook, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		for _, name := range bootstrapNamespaces {
			_, err := c.client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
			if err != nil && !apierrors.IsAlreadyExists(err) {
				logger.V(2).Info("Namespace not created yet, retrying", "namespace", name, "err", err)
				return false, nil
			}
		}
		return true, nil
	})
}

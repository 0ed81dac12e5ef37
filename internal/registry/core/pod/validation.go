package pod

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	resourcevalidation "github.com/draplane/draplane/apis/resource/validation"
)

// Kubernetes' pod validation works only on its internal types; this is our
// own, covering what clients of a DRA control plane run into: containers,
// volumes, tolerations, scheduling gates and resource claims.

// ValidatePod validates a new pod.
func ValidatePod(pod *corev1.Pod) field.ErrorList {
	if errs := resourcevalidation.ValidateQuantityMagnitudes(&pod.Spec, field.NewPath("spec")); len(errs) > 0 {
		return errs // comparing such quantities would run for minutes
	}
	allErrs := apimachineryvalidation.ValidateObjectMeta(&pod.ObjectMeta, true, apimachineryvalidation.NameIsDNSSubdomain, field.NewPath("metadata"))
	return append(allErrs, validatePodSpec(&pod.Spec, field.NewPath("spec"))...)
}

func validatePodSpec(spec *corev1.PodSpec, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList

	volumes, errs := validateVolumes(spec.Volumes, fldPath.Child("volumes"))
	allErrs = append(allErrs, errs...)
	claims := sets.New[string]()
	allErrs = append(allErrs, validatePodResourceClaims(spec.ResourceClaims, claims, fldPath.Child("resourceClaims"))...)

	containerNames := sets.New[string]()
	if len(spec.Containers) == 0 {
		allErrs = append(allErrs, field.Required(fldPath.Child("containers"), "must have at least one container"))
	}
	for i := range spec.InitContainers {
		allErrs = append(allErrs, validateContainer(&spec.InitContainers[i], true, containerNames, volumes, claims, fldPath.Child("initContainers").Index(i))...)
	}
	for i := range spec.Containers {
		allErrs = append(allErrs, validateContainer(&spec.Containers[i], false, containerNames, volumes, claims, fldPath.Child("containers").Index(i))...)
	}
	for i := range spec.EphemeralContainers {
		allErrs = append(allErrs, field.Forbidden(fldPath.Child("ephemeralContainers").Index(i), "ephemeral containers are not supported"))
	}

	switch spec.RestartPolicy {
	case corev1.RestartPolicyAlways, corev1.RestartPolicyOnFailure, corev1.RestartPolicyNever:
	case "":
		allErrs = append(allErrs, field.Required(fldPath.Child("restartPolicy"), ""))
	default:
		allErrs = append(allErrs, field.NotSupported(fldPath.Child("restartPolicy"), spec.RestartPolicy,
			[]corev1.RestartPolicy{corev1.RestartPolicyAlways, corev1.RestartPolicyOnFailure, corev1.RestartPolicyNever}))
	}
	switch spec.DNSPolicy {
	case corev1.DNSClusterFirst, corev1.DNSClusterFirstWithHostNet, corev1.DNSDefault:
	case corev1.DNSNone:
		if spec.DNSConfig == nil {
			allErrs = append(allErrs, field.Required(fldPath.Child("dnsConfig"), "must provide `dnsConfig` when `dnsPolicy` is None"))
		}
	case "":
		allErrs = append(allErrs, field.Required(fldPath.Child("dnsPolicy"), ""))
	default:
		allErrs = append(allErrs, field.NotSupported(fldPath.Child("dnsPolicy"), spec.DNSPolicy,
			[]corev1.DNSPolicy{corev1.DNSClusterFirstWithHostNet, corev1.DNSClusterFirst, corev1.DNSDefault, corev1.DNSNone}))
	}

	if spec.TerminationGracePeriodSeconds != nil && *spec.TerminationGracePeriodSeconds < 0 {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("terminationGracePeriodSeconds"), *spec.TerminationGracePeriodSeconds, "must be greater than or equal to 0"))
	}
	if spec.ActiveDeadlineSeconds != nil && *spec.ActiveDeadlineSeconds <= 0 {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("activeDeadlineSeconds"), *spec.ActiveDeadlineSeconds, "must be greater than 0"))
	}
	allErrs = append(allErrs, validateDNSSubdomain(spec.NodeName, fldPath.Child("nodeName"))...)
	allErrs = append(allErrs, validateDNSSubdomain(spec.ServiceAccountName, fldPath.Child("serviceAccountName"))...)
	allErrs = append(allErrs, validateDNSSubdomain(spec.SchedulerName, fldPath.Child("schedulerName"))...)
	allErrs = append(allErrs, validateDNSLabel(spec.Hostname, fldPath.Child("hostname"))...)
	allErrs = append(allErrs, validateDNSLabel(spec.Subdomain, fldPath.Child("subdomain"))...)
	allErrs = append(allErrs, metav1validation.ValidateLabels(spec.NodeSelector, fldPath.Child("nodeSelector"))...)
	allErrs = append(allErrs, validateTolerations(spec.Tolerations, fldPath.Child("tolerations"))...)
	if spec.Affinity != nil && spec.Affinity.NodeAffinity != nil {
		allErrs = append(allErrs, validateNodeAffinity(spec.Affinity.NodeAffinity, fldPath.Child("affinity", "nodeAffinity"))...)
	}
	allErrs = append(allErrs, validateSchedulingGates(spec.SchedulingGates, fldPath.Child("schedulingGates"))...)
	allErrs = append(allErrs, validateSchedulingGroup(spec.SchedulingGroup, fldPath.Child("schedulingGroup"))...)
	if spec.NodeName != "" && len(spec.SchedulingGates) > 0 {
		allErrs = append(allErrs, field.Forbidden(fldPath.Child("nodeName"), "cannot be set until all schedulingGates have been cleared"))
	}
	return allErrs
}

// validateSchedulingGroup checks spec.schedulingGroup as upstream does:
// exactly one way of naming the group, today only podGroupName, a DNS
// subdomain.
func validateSchedulingGroup(group *corev1.PodSchedulingGroup, fldPath *field.Path) field.ErrorList {
	if group == nil {
		return nil
	}
	if group.PodGroupName == nil {
		return field.ErrorList{field.Invalid(fldPath, "", "must specify one of: `podGroupName`")}
	}
	return validateRequiredDNSSubdomain(*group.PodGroupName, fldPath.Child("podGroupName"))
}

func validateDNSSubdomain(value string, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if value == "" {
		return nil
	}
	for _, msg := range validation.IsDNS1123Subdomain(value) {
		allErrs = append(allErrs, field.Invalid(fldPath, value, msg))
	}
	return allErrs
}

func validateDNSLabel(value string, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if value == "" {
		return nil
	}
	for _, msg := range validation.IsDNS1123Label(value) {
		allErrs = append(allErrs, field.Invalid(fldPath, value, msg))
	}
	return allErrs
}

func validateVolumes(volumes []corev1.Volume, fldPath *field.Path) (sets.Set[string], field.ErrorList) {
	var allErrs field.ErrorList
	names := sets.New[string]()
	for i, volume := range volumes {
		idxPath := fldPath.Index(i)
		switch {
		case volume.Name == "":
			allErrs = append(allErrs, field.Required(idxPath.Child("name"), ""))
		case names.Has(volume.Name):
			allErrs = append(allErrs, field.Duplicate(idxPath.Child("name"), volume.Name))
		default:
			allErrs = append(allErrs, validateDNSLabel(volume.Name, idxPath.Child("name"))...)
		}
		names.Insert(volume.Name)
		if n := countVolumeSources(&volume.VolumeSource); n == 0 {
			allErrs = append(allErrs, field.Required(idxPath, "must specify a volume type"))
		} else if n > 1 {
			allErrs = append(allErrs, field.Forbidden(idxPath, "may not specify more than 1 volume type"))
		}
	}
	return names, allErrs
}

// countVolumeSources counts the non-nil pointers of a VolumeSource, which
// has one pointer field per volume type.
func countVolumeSources(src *corev1.VolumeSource) int {
	n := 0
	for _, set := range []bool{
		src.HostPath != nil, src.EmptyDir != nil, src.GCEPersistentDisk != nil, src.AWSElasticBlockStore != nil,
		src.GitRepo != nil, src.Secret != nil, src.NFS != nil, src.ISCSI != nil, src.Glusterfs != nil,
		src.PersistentVolumeClaim != nil, src.RBD != nil, src.FlexVolume != nil, src.Cinder != nil,
		src.CephFS != nil, src.Flocker != nil, src.DownwardAPI != nil, src.FC != nil, src.AzureFile != nil,
		src.ConfigMap != nil, src.VsphereVolume != nil, src.Quobyte != nil, src.AzureDisk != nil,
		src.PhotonPersistentDisk != nil, src.Projected != nil, src.PortworxVolume != nil, src.ScaleIO != nil,
		src.StorageOS != nil, src.CSI != nil, src.Ephemeral != nil, src.Image != nil,
	} {
		if set {
			n++
		}
	}
	return n
}

func validatePodResourceClaims(claims []corev1.PodResourceClaim, names sets.Set[string], fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	for i, claim := range claims {
		idxPath := fldPath.Index(i)
		switch {
		case claim.Name == "":
			allErrs = append(allErrs, field.Required(idxPath.Child("name"), ""))
		case names.Has(claim.Name):
			allErrs = append(allErrs, field.Duplicate(idxPath.Child("name"), claim.Name))
		default:
			allErrs = append(allErrs, validateDNSLabel(claim.Name, idxPath.Child("name"))...)
		}
		names.Insert(claim.Name)
		switch {
		case claim.ResourceClaimName != nil && claim.ResourceClaimTemplateName != nil:
			allErrs = append(allErrs, field.Invalid(idxPath, claim, "at most one of `resourceClaimName` or `resourceClaimTemplateName` may be specified"))
		case claim.ResourceClaimName == nil && claim.ResourceClaimTemplateName == nil:
			allErrs = append(allErrs, field.Invalid(idxPath, claim, "must specify one of: `resourceClaimName`, `resourceClaimTemplateName`"))
		case claim.ResourceClaimName != nil:
			allErrs = append(allErrs, validateRequiredDNSSubdomain(*claim.ResourceClaimName, idxPath.Child("resourceClaimName"))...)
		default:
			allErrs = append(allErrs, validateRequiredDNSSubdomain(*claim.ResourceClaimTemplateName, idxPath.Child("resourceClaimTemplateName"))...)
		}
	}
	return allErrs
}

func validateRequiredDNSSubdomain(value string, fldPath *field.Path) field.ErrorList {
	if value == "" {
		return field.ErrorList{field.Required(fldPath, "")}
	}
	return validateDNSSubdomain(value, fldPath)
}

var supportedProtocols = []corev1.Protocol{corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP}

func validateContainer(c *corev1.Container, isInit bool, names sets.Set[string], volumes, claims sets.Set[string], fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	switch {
	case c.Name == "":
		allErrs = append(allErrs, field.Required(fldPath.Child("name"), ""))
	case names.Has(c.Name):
		allErrs = append(allErrs, field.Duplicate(fldPath.Child("name"), c.Name))
	default:
		allErrs = append(allErrs, validateDNSLabel(c.Name, fldPath.Child("name"))...)
	}
	names.Insert(c.Name)
	if strings.TrimSpace(c.Image) == "" {
		allErrs = append(allErrs, field.Required(fldPath.Child("image"), ""))
	} else if c.Image != strings.TrimSpace(c.Image) {
		allErrs = append(allErrs, field.Invalid(fldPath.Child("image"), c.Image, "must not have leading or trailing whitespace"))
	}
	switch c.ImagePullPolicy {
	case corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever:
	case "":
		allErrs = append(allErrs, field.Required(fldPath.Child("imagePullPolicy"), ""))
	default:
		allErrs = append(allErrs, field.NotSupported(fldPath.Child("imagePullPolicy"), c.ImagePullPolicy,
			[]corev1.PullPolicy{corev1.PullAlways, corev1.PullIfNotPresent, corev1.PullNever}))
	}
	switch c.TerminationMessagePolicy {
	case corev1.TerminationMessageReadFile, corev1.TerminationMessageFallbackToLogsOnError:
	case "":
		allErrs = append(allErrs, field.Required(fldPath.Child("terminationMessagePolicy"), ""))
	default:
		allErrs = append(allErrs, field.NotSupported(fldPath.Child("terminationMessagePolicy"), c.TerminationMessagePolicy,
			[]corev1.TerminationMessagePolicy{corev1.TerminationMessageReadFile, corev1.TerminationMessageFallbackToLogsOnError}))
	}
	if c.RestartPolicy != nil {
		// Init containers with restartPolicy Always are sidecars; regular
		// containers may override the pod's restart policy.
		allowed := []corev1.ContainerRestartPolicy{corev1.ContainerRestartPolicyAlways}
		if !isInit {
			allowed = append(allowed, corev1.ContainerRestartPolicyOnFailure, corev1.ContainerRestartPolicyNever)
		}
		if !slices.Contains(allowed, *c.RestartPolicy) {
			allErrs = append(allErrs, field.NotSupported(fldPath.Child("restartPolicy"), *c.RestartPolicy, allowed))
		}
	}
	allErrs = append(allErrs, validateContainerPorts(c.Ports, fldPath.Child("ports"))...)
	allErrs = append(allErrs, validateVolumeMounts(c.VolumeMounts, volumes, fldPath.Child("volumeMounts"))...)
	allErrs = append(allErrs, validateResources(&c.Resources, claims, fldPath.Child("resources"))...)
	return allErrs
}

// validateContainerPorts checks a container's ports: valid numbers and
// protocols, names unique within the container.
func validateContainerPorts(ports []corev1.ContainerPort, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	portNames := sets.New[string]()
	for i, port := range ports {
		idxPath := fldPath.Index(i)
		if port.Name != "" {
			for _, msg := range validation.IsValidPortName(port.Name) {
				allErrs = append(allErrs, field.Invalid(idxPath.Child("name"), port.Name, msg))
			}
			if portNames.Has(port.Name) {
				allErrs = append(allErrs, field.Duplicate(idxPath.Child("name"), port.Name))
			}
			portNames.Insert(port.Name)
		}
		for _, msg := range validation.IsValidPortNum(int(port.ContainerPort)) {
			allErrs = append(allErrs, field.Invalid(idxPath.Child("containerPort"), port.ContainerPort, msg))
		}
		if port.HostPort != 0 {
			for _, msg := range validation.IsValidPortNum(int(port.HostPort)) {
				allErrs = append(allErrs, field.Invalid(idxPath.Child("hostPort"), port.HostPort, msg))
			}
		}
		if !slices.Contains(supportedProtocols, port.Protocol) {
			allErrs = append(allErrs, field.NotSupported(idxPath.Child("protocol"), port.Protocol, supportedProtocols))
		}
	}
	return allErrs
}

// validateVolumeMounts checks that a container mounts volumes of the pod,
// each at a path of its own.
func validateVolumeMounts(mounts []corev1.VolumeMount, volumes sets.Set[string], fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	mountPaths := sets.New[string]()
	for i, mount := range mounts {
		idxPath := fldPath.Index(i)
		if mount.Name == "" {
			allErrs = append(allErrs, field.Required(idxPath.Child("name"), ""))
		} else if !volumes.Has(mount.Name) {
			allErrs = append(allErrs, field.NotFound(idxPath.Child("name"), mount.Name))
		}
		if mount.MountPath == "" {
			allErrs = append(allErrs, field.Required(idxPath.Child("mountPath"), ""))
		} else if mountPaths.Has(mount.MountPath) {
			allErrs = append(allErrs, field.Invalid(idxPath.Child("mountPath"), mount.MountPath, "must be unique"))
		}
		mountPaths.Insert(mount.MountPath)
	}
	return allErrs
}

func validateResources(resources *corev1.ResourceRequirements, claims sets.Set[string], fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	for name, quantity := range resources.Limits {
		allErrs = append(allErrs, validateResourceQuantity(name, quantity, fldPath.Child("limits").Key(string(name)))...)
	}
	for name, quantity := range resources.Requests {
		requestPath := fldPath.Child("requests").Key(string(name))
		allErrs = append(allErrs, validateResourceQuantity(name, quantity, requestPath)...)
		limit, hasLimit := resources.Limits[name]
		switch {
		case hasLimit && !overcommitAllowed(name) && quantity.Cmp(limit) != 0:
			allErrs = append(allErrs, field.Invalid(requestPath, quantity.String(), fmt.Sprintf("must be equal to %s limit of %s", name, limit.String())))
		case hasLimit && quantity.Cmp(limit) > 0:
			allErrs = append(allErrs, field.Invalid(requestPath, quantity.String(), fmt.Sprintf("must be less than or equal to %s limit of %s", name, limit.String())))
		case !hasLimit && !overcommitAllowed(name):
			allErrs = append(allErrs, field.Required(fldPath.Child("limits").Key(string(name)), "must be set for extended resources, equal to the request"))
		}
	}
	seen := sets.New[string]()
	for i, claim := range resources.Claims {
		idxPath := fldPath.Child("claims").Index(i)
		id := claim.Name + "/" + claim.Request
		switch {
		case claim.Name == "":
			allErrs = append(allErrs, field.Required(idxPath.Child("name"), ""))
		case !claims.Has(claim.Name):
			allErrs = append(allErrs, field.NotFound(idxPath.Child("name"), claim.Name))
		case seen.Has(id):
			allErrs = append(allErrs, field.Duplicate(idxPath, claim.Name))
		}
		seen.Insert(id)
	}
	return allErrs
}

// validateResourceQuantity checks a container resource's name and amount
// as Kubernetes does: names are qualified, an unprefixed one is standard,
// a prefixed one outside kubernetes.io is an extended resource, and
// extended resources (which may stand for devices, see KEP-5004) come in
// whole units. A DeviceClass's implicit name
// (deviceclass.resource.kubernetes.io/<class>) also counts whole devices.
func validateResourceQuantity(name corev1.ResourceName, quantity resource.Quantity, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	for _, msg := range validation.IsQualifiedName(string(name)) {
		allErrs = append(allErrs, field.Invalid(fldPath, string(name), msg))
	}
	if len(allErrs) > 0 {
		return allErrs
	}
	switch {
	case !strings.Contains(string(name), "/"):
		if !standardContainerResources.Has(string(name)) && !strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix) {
			allErrs = append(allErrs, field.Invalid(fldPath, string(name), "must be a standard resource for containers or fully qualified"))
		}
	case !strings.Contains(string(name), corev1.ResourceDefaultNamespacePrefix) && !resourcevalidation.IsExtendedResourceName(name):
		allErrs = append(allErrs, field.Invalid(fldPath, string(name), "doesn't follow extended resource name standard"))
	}
	if quantity.Sign() < 0 {
		allErrs = append(allErrs, field.Invalid(fldPath, quantity.String(), "must be greater than or equal to 0"))
	}
	if (resourcevalidation.IsExtendedResourceName(name) || strings.HasPrefix(string(name), deviceClassResourcePrefix)) && quantity.MilliValue()%1000 != 0 {
		allErrs = append(allErrs, field.Invalid(fldPath, quantity.String(), "must be an integer"))
	}
	return allErrs
}

// deviceClassResourcePrefix followed by a DeviceClass name is the
// extended resource name every class has (upstream's name; see
// podclaims).
const deviceClassResourcePrefix = "deviceclass.resource.kubernetes.io/"

var standardContainerResources = sets.New(string(corev1.ResourceCPU), string(corev1.ResourceMemory), string(corev1.ResourceEphemeralStorage))

// overcommitAllowed: only Kubernetes' own resources other than huge pages
// may be requested below their limit; extended resources are requested
// exactly.
func overcommitAllowed(name corev1.ResourceName) bool {
	native := !strings.Contains(string(name), "/") || strings.Contains(string(name), corev1.ResourceDefaultNamespacePrefix)
	return native && !strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix)
}

var tolerationOperators = []corev1.TolerationOperator{corev1.TolerationOpEqual, corev1.TolerationOpExists}

func validateTolerations(tolerations []corev1.Toleration, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	for i, toleration := range tolerations {
		idxPath := fldPath.Index(i)
		if toleration.Key != "" {
			for _, msg := range validation.IsQualifiedName(toleration.Key) {
				allErrs = append(allErrs, field.Invalid(idxPath.Child("key"), toleration.Key, msg))
			}
		} else if toleration.Operator != corev1.TolerationOpExists {
			allErrs = append(allErrs, field.Invalid(idxPath.Child("operator"), toleration.Operator, "operator must be Exists when `key` is empty, which means \"match all values and all keys\""))
		}
		switch toleration.Operator {
		case corev1.TolerationOpEqual, "":
			for _, msg := range validation.IsValidLabelValue(toleration.Value) {
				allErrs = append(allErrs, field.Invalid(idxPath.Child("value"), toleration.Value, msg))
			}
		case corev1.TolerationOpExists:
			if toleration.Value != "" {
				allErrs = append(allErrs, field.Invalid(idxPath.Child("value"), toleration.Value, "value must be empty when `operator` is 'Exists'"))
			}
		default:
			allErrs = append(allErrs, field.NotSupported(idxPath.Child("operator"), toleration.Operator, tolerationOperators))
		}
		switch toleration.Effect {
		case "", corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
		default:
			allErrs = append(allErrs, field.NotSupported(idxPath.Child("effect"), toleration.Effect,
				[]corev1.TaintEffect{corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute}))
		}
		if toleration.TolerationSeconds != nil && toleration.Effect != corev1.TaintEffectNoExecute {
			allErrs = append(allErrs, field.Invalid(idxPath.Child("effect"), toleration.Effect, "effect must be 'NoExecute' when `tolerationSeconds` is set"))
		}
	}
	return allErrs
}

func validateSchedulingGates(gates []corev1.PodSchedulingGate, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	seen := sets.New[string]()
	for i, gate := range gates {
		idxPath := fldPath.Index(i).Child("name")
		for _, msg := range validation.IsQualifiedName(gate.Name) {
			allErrs = append(allErrs, field.Invalid(idxPath, gate.Name, msg))
		}
		if seen.Has(gate.Name) {
			allErrs = append(allErrs, field.Duplicate(idxPath, gate.Name))
		}
		seen.Insert(gate.Name)
	}
	return allErrs
}

// ValidatePodUpdate validates a spec update. Like upstream, the spec is
// immutable apart from container images, a shorter activeDeadlineSeconds,
// added tolerations, removed scheduling gates and, while the pod is still
// gated, node selector and affinity. spec.nodeName changes only through the
// binding subresource.
func ValidatePodUpdate(pod, oldPod *corev1.Pod) field.ErrorList {
	if errs := resourcevalidation.ValidateQuantityMagnitudes(&pod.Spec, field.NewPath("spec")); len(errs) > 0 {
		return errs // comparing such quantities would run for minutes
	}
	specPath := field.NewPath("spec")
	allErrs := apimachineryvalidation.ValidateObjectMetaUpdate(&pod.ObjectMeta, &oldPod.ObjectMeta, field.NewPath("metadata"))
	allErrs = append(allErrs, validatePodSpec(&pod.Spec, specPath)...)

	if pod.Spec.NodeName != oldPod.Spec.NodeName {
		allErrs = append(allErrs, field.Forbidden(specPath.Child("nodeName"), "may only be set through the binding subresource"))
	}
	if old, cur := oldPod.Spec.ActiveDeadlineSeconds, pod.Spec.ActiveDeadlineSeconds; old != nil && (cur == nil || *cur > *old) {
		allErrs = append(allErrs, field.Invalid(specPath.Child("activeDeadlineSeconds"), cur, "must be less than or equal to the previous value and may not be unset"))
	}
	for _, toleration := range oldPod.Spec.Tolerations {
		if !slices.ContainsFunc(pod.Spec.Tolerations, func(t corev1.Toleration) bool { return apiequality.Semantic.DeepEqual(t, toleration) }) {
			allErrs = append(allErrs, field.Forbidden(specPath.Child("tolerations"), "existing toleration can not be modified or removed"))
			break
		}
	}
	for i, gate := range pod.Spec.SchedulingGates {
		if !slices.Contains(oldPod.Spec.SchedulingGates, gate) {
			allErrs = append(allErrs, field.Forbidden(specPath.Child("schedulingGates").Index(i), "only deletion is allowed, but found new scheduling gate '"+gate.Name+"'"))
		}
	}
	if len(pod.Spec.Containers) != len(oldPod.Spec.Containers) || len(pod.Spec.InitContainers) != len(oldPod.Spec.InitContainers) {
		allErrs = append(allErrs, field.Forbidden(specPath, "pod updates may not add or remove containers"))
		return allErrs
	}

	// Copy what may change from the new spec onto the old one; anything else
	// that differs is a forbidden update.
	mutable := oldPod.Spec.DeepCopy()
	for i := range mutable.Containers {
		mutable.Containers[i].Image = pod.Spec.Containers[i].Image
	}
	for i := range mutable.InitContainers {
		mutable.InitContainers[i].Image = pod.Spec.InitContainers[i].Image
	}
	mutable.ActiveDeadlineSeconds = pod.Spec.ActiveDeadlineSeconds
	mutable.Tolerations = pod.Spec.Tolerations
	mutable.SchedulingGates = pod.Spec.SchedulingGates
	mutable.NodeName = pod.Spec.NodeName
	if len(oldPod.Spec.SchedulingGates) > 0 {
		mutable.NodeSelector = pod.Spec.NodeSelector
		mutable.Affinity = pod.Spec.Affinity
	}
	if !apiequality.Semantic.DeepEqual(*mutable, pod.Spec) {
		allErrs = append(allErrs, field.Forbidden(specPath, "pod updates may not change fields other than `spec.containers[*].image`, `spec.initContainers[*].image`, `spec.activeDeadlineSeconds`, `spec.tolerations` (only additions to existing tolerations), `spec.schedulingGates` (only removals) and, while the pod is gated, `spec.nodeSelector` and `spec.affinity`"))
	}
	return allErrs
}

var podPhases = []corev1.PodPhase{corev1.PodPending, corev1.PodRunning, corev1.PodSucceeded, corev1.PodFailed, corev1.PodUnknown}

// ValidatePodStatusUpdate validates an update through the status subresource.
func ValidatePodStatusUpdate(pod, oldPod *corev1.Pod) field.ErrorList {
	statusPath := field.NewPath("status")
	allErrs := apimachineryvalidation.ValidateObjectMetaUpdate(&pod.ObjectMeta, &oldPod.ObjectMeta, field.NewPath("metadata"))
	if pod.Status.Phase != "" && !slices.Contains(podPhases, pod.Status.Phase) {
		allErrs = append(allErrs, field.NotSupported(statusPath.Child("phase"), pod.Status.Phase, podPhases))
	}
	// A pod that finished stays finished.
	if oldPod.Status.Phase == corev1.PodSucceeded || oldPod.Status.Phase == corev1.PodFailed {
		if pod.Status.Phase != oldPod.Status.Phase {
			allErrs = append(allErrs, field.Forbidden(statusPath.Child("phase"), fmt.Sprintf("cannot transition from terminal phase %s to %s", oldPod.Status.Phase, pod.Status.Phase)))
		}
	}
	for i, condition := range pod.Status.Conditions {
		idxPath := statusPath.Child("conditions").Index(i)
		if condition.Type == "" {
			allErrs = append(allErrs, field.Required(idxPath.Child("type"), ""))
		}
		switch condition.Status {
		case corev1.ConditionTrue, corev1.ConditionFalse, corev1.ConditionUnknown:
		default:
			allErrs = append(allErrs, field.NotSupported(idxPath.Child("status"), condition.Status,
				[]corev1.ConditionStatus{corev1.ConditionTrue, corev1.ConditionFalse, corev1.ConditionUnknown}))
		}
	}
	allErrs = append(allErrs, validateDNSSubdomain(pod.Status.NominatedNodeName, statusPath.Child("nominatedNodeName"))...)
	claimNames := sets.New[string]()
	for _, claim := range pod.Spec.ResourceClaims {
		claimNames.Insert(claim.Name)
	}
	for i, status := range pod.Status.ResourceClaimStatuses {
		idxPath := statusPath.Child("resourceClaimStatuses").Index(i)
		if !claimNames.Has(status.Name) {
			allErrs = append(allErrs, field.NotFound(idxPath.Child("name"), status.Name))
		}
		if status.ResourceClaimName != nil {
			allErrs = append(allErrs, validateRequiredDNSSubdomain(*status.ResourceClaimName, idxPath.Child("resourceClaimName"))...)
		}
	}
	allErrs = append(allErrs, validateAllocatedResourcesStatus(pod, statusPath.Child("containerStatuses"))...)
	return append(allErrs, validateExtendedResourceClaimStatus(pod.Status.ExtendedResourceClaimStatus, &pod.Spec, statusPath.Child("extendedResourceClaimStatus"))...)
}

// validateAllocatedResourcesStatus checks the names of the containers'
// allocatedResourcesStatus entries, as upstream: "claim:<pod claim>" or
// "claim:<pod claim>/<request>" must be an entry of the container's
// resources.claims (or a mapping of the extended resource claim status),
// any other name one of the container's resource requests.
func validateAllocatedResourcesStatus(pod *corev1.Pod, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	for i, status := range pod.Status.ContainerStatuses {
		var container *corev1.Container
		for j := range pod.Spec.Containers {
			if pod.Spec.Containers[j].Name == status.Name {
				container = &pod.Spec.Containers[j]
			}
		}
		if container == nil {
			continue
		}
		for j, allocated := range status.AllocatedResourcesStatus {
			namePath := fldPath.Index(i).Child("allocatedResourcesStatus").Index(j).Child("name")
			if claimRef, ok := strings.CutPrefix(string(allocated.Name), "claim:"); ok {
				if !slices.ContainsFunc(container.Resources.Claims, func(c corev1.ResourceClaim) bool {
					return c.Name == claimRef && c.Request == "" || c.Request != "" && c.Name+"/"+c.Request == claimRef
				}) && !extendedResourceStatusNamed(pod, container, claimRef) {
					allErrs = append(allErrs, field.Invalid(namePath, allocated.Name,
						"must match one of the container's resource claims as 'claim:<claimName>/<requestName>' when container.resources.claims[*].request is set or 'claim:<claimName>' when it is empty"))
				}
				continue
			}
			if _, ok := container.Resources.Requests[allocated.Name]; !ok {
				allErrs = append(allErrs, field.Invalid(namePath, allocated.Name, "must match one of the container's resource requests"))
			}
		}
	}
	return allErrs
}

// extendedResourceStatusNamed: "<claim>/<request>" is the claim made for
// the pod's extended resources and one of its requests for the container.
func extendedResourceStatusNamed(pod *corev1.Pod, container *corev1.Container, claimRef string) bool {
	status := pod.Status.ExtendedResourceClaimStatus
	if status == nil {
		return false
	}
	claim, request, _ := strings.Cut(claimRef, "/")
	if claim != status.ResourceClaimName {
		return false
	}
	return slices.ContainsFunc(status.RequestMappings, func(m corev1.ContainerExtendedResourceRequest) bool {
		quantity, ok := container.Resources.Requests[corev1.ResourceName(m.ResourceName)]
		return m.ContainerName == container.Name && m.RequestName == request && ok && !quantity.IsZero()
	})
}

// validateExtendedResourceClaimStatus checks the record of the claim made
// for the pod's extended resources, as upstream: each mapping names a
// container of the pod, a resource that container requests and a request
// name that is a DNS label; the claim name is required.
func validateExtendedResourceClaimStatus(status *corev1.PodExtendedResourceClaimStatus, spec *corev1.PodSpec, fldPath *field.Path) field.ErrorList {
	if status == nil {
		return nil
	}
	var allErrs field.ErrorList
	containers := make(map[string]*corev1.Container, len(spec.InitContainers)+len(spec.Containers))
	for _, list := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
		for i := range list {
			containers[list[i].Name] = &list[i]
		}
	}
	mappingsPath := fldPath.Child("requestMappings")
	if len(status.RequestMappings) == 0 {
		allErrs = append(allErrs, field.Required(mappingsPath, "at least one request mapping is required"))
	}
	seen := sets.New[corev1.ContainerExtendedResourceRequest]()
	for i, mapping := range status.RequestMappings {
		idxPath := mappingsPath.Index(i)
		if c, ok := containers[mapping.ContainerName]; !ok {
			allErrs = append(allErrs, field.Invalid(idxPath.Child("containerName"), mapping.ContainerName, "must match the name of an entry in spec.initContainers or spec.containers"))
		} else if _, ok := c.Resources.Requests[corev1.ResourceName(mapping.ResourceName)]; !ok {
			allErrs = append(allErrs, field.Invalid(idxPath.Child("resourceName"), mapping.ResourceName, "must be a resource that the container requests"))
		}
		allErrs = append(allErrs, validateDNSLabel(mapping.RequestName, idxPath.Child("requestName"))...)
		if mapping.RequestName == "" {
			allErrs = append(allErrs, field.Required(idxPath.Child("requestName"), ""))
		}
		if seen.Has(mapping) {
			allErrs = append(allErrs, field.Duplicate(idxPath, mapping))
		}
		seen.Insert(mapping)
	}
	return append(allErrs, validateRequiredDNSSubdomain(status.ResourceClaimName, fldPath.Child("resourceClaimName"))...)
}

// validateNodeAffinity checks node affinity, which the allocation controller
// may also write (a required term that pins the chosen node).
func validateNodeAffinity(affinity *corev1.NodeAffinity, fldPath *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if required := affinity.RequiredDuringSchedulingIgnoredDuringExecution; required != nil {
		allErrs = append(allErrs, resourcevalidation.ValidateNodeSelector(required, false, fldPath.Child("requiredDuringSchedulingIgnoredDuringExecution"))...)
	}
	for i, preferred := range affinity.PreferredDuringSchedulingIgnoredDuringExecution {
		idxPath := fldPath.Child("preferredDuringSchedulingIgnoredDuringExecution").Index(i)
		if preferred.Weight < 1 || preferred.Weight > 100 {
			allErrs = append(allErrs, field.Invalid(idxPath.Child("weight"), preferred.Weight, "must be in the range 1-100"))
		}
		// Invalid label values may stand in a preference, as upstream:
		// they can only fail to match.
		allErrs = append(allErrs, resourcevalidation.ValidateNodeSelectorTerm(preferred.Preference, true, idxPath.Child("preference"))...)
	}
	return allErrs
}

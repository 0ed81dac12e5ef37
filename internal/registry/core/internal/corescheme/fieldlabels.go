package corescheme

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/sets"
)

// Field labels each kind accepts in field selectors. Every label listed here
// is produced by the attrs func of the kind's strategy.
var (
	PodFieldLabels = sets.New(
		"metadata.name", "metadata.namespace",
		"spec.nodeName", "spec.restartPolicy", "spec.schedulerName", "spec.serviceAccountName", "spec.hostNetwork",
		"status.phase", "status.podIP", "status.nominatedNodeName",
	)
	EventFieldLabels = sets.New(
		"metadata.name", "metadata.namespace",
		"involvedObject.kind", "involvedObject.namespace", "involvedObject.name", "involvedObject.uid",
		"involvedObject.apiVersion", "involvedObject.resourceVersion", "involvedObject.fieldPath",
		"reason", "reportingComponent", "source", "type",
	)
	NodeFieldLabels      = sets.New("metadata.name", "spec.unschedulable")
	NamespaceFieldLabels = sets.New("metadata.name", "status.phase")
	LeaseFieldLabels     = sets.New("metadata.name", "metadata.namespace")
)

// Older clients still send these names.
var fieldLabelAliases = map[string]map[string]string{
	"Pod":       {"spec.host": "spec.nodeName"},
	"Namespace": {"name": "metadata.name"},
}

func addFieldLabelConversionFuncs(scheme *runtime.Scheme) error {
	for kind, labels := range map[string]sets.Set[string]{
		"Pod": PodFieldLabels, "Event": EventFieldLabels, "Node": NodeFieldLabels, "Namespace": NamespaceFieldLabels,
	} {
		if err := scheme.AddFieldLabelConversionFunc(CoreV1.WithKind(kind), fieldLabelConverter(kind, labels)); err != nil {
			return err
		}
	}
	return scheme.AddFieldLabelConversionFunc(CoordinationV1.WithKind("Lease"), fieldLabelConverter("Lease", LeaseFieldLabels))
}

func fieldLabelConverter(kind string, labels sets.Set[string]) runtime.FieldLabelConversionFunc {
	aliases := fieldLabelAliases[kind]
	return func(label, value string) (string, string, error) {
		if alias, ok := aliases[label]; ok {
			label = alias
		}
		if labels.Has(label) {
			return label, value, nil
		}
		return "", "", fmt.Errorf("field label not supported for %s: %s", kind, label)
	}
}

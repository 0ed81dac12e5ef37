package event

import (
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/registry/generic"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"

	"github.com/draplane/draplane/internal/registry/internal/table"
	"github.com/draplane/draplane/internal/registry/patcherrors"
)

// TTL is how long an event is kept after its last write, as the
// kube-apiserver's default --event-ttl.
const TTL = time.Hour

// REST serves events.
type REST struct {
	patcherrors.Store
}

// NewREST returns the storage of events.
func NewREST(optsGetter generic.RESTOptionsGetter) (*REST, error) {
	store := &genericregistry.Store{
		NewFunc:                   func() runtime.Object { return &corev1.Event{} },
		NewListFunc:               func() runtime.Object { return &corev1.EventList{} },
		DefaultQualifiedResource:  corev1.Resource("events"),
		SingularQualifiedResource: corev1.Resource("event"),
		PredicateFunc:             Matcher,
		TTLFunc: func(runtime.Object, uint64, bool) (uint64, error) {
			return uint64(TTL.Seconds()), nil
		},
		CreateStrategy: Strategy,
		UpdateStrategy: Strategy,
		DeleteStrategy: Strategy,
		TableConvertor: tableConvertor,
	}
	if err := store.CompleteWithOptions(&generic.StoreOptions{RESTOptions: optsGetter, AttrFunc: GetAttrs}); err != nil {
		return nil, err
	}
	return &REST{Store: patcherrors.Store{Store: store}}, nil
}

// ShortNames implements rest.ShortNamesProvider.
func (r *REST) ShortNames() []string { return []string{"ev"} }

var eventDescriptions = corev1.Event{}.SwaggerDoc()

// nameColumnWide shows event names only with -o wide, as kubectl does.
var nameColumnWide = func() metav1.TableColumnDefinition {
	column := table.NameColumn
	column.Priority = 1
	return column
}()

var tableConvertor = table.Convertor[*corev1.Event]{
	Columns: []metav1.TableColumnDefinition{
		{Name: "Last Seen", Type: "string", Description: eventDescriptions["lastTimestamp"]},
		{Name: "Type", Type: "string", Description: eventDescriptions["type"]},
		{Name: "Reason", Type: "string", Description: eventDescriptions["reason"]},
		{Name: "Object", Type: "string", Description: eventDescriptions["involvedObject"]},
		{Name: "Message", Type: "string", Description: eventDescriptions["message"]},
		{Name: "Source", Type: "string", Priority: 1, Description: eventDescriptions["source"]},
		{Name: "Count", Type: "integer", Priority: 1, Description: eventDescriptions["count"]},
		nameColumnWide,
	},
	Row: func(event *corev1.Event) []interface{} {
		object := strings.ToLower(event.InvolvedObject.Kind) + "/" + event.InvolvedObject.Name
		source := event.Source.Component
		if source == "" {
			source = event.ReportingController
		}
		if event.Source.Host != "" {
			source += ", " + event.Source.Host
		}
		count := event.Count
		if event.Series != nil {
			count = event.Series.Count
		} else if count == 0 {
			count = 1
		}
		return []interface{}{table.Age(lastSeen(event)), event.Type, event.Reason, object, strings.TrimSpace(event.Message), source, int64(count), event.Name}
	},
}

// lastSeen is the newest of the times an event records.
func lastSeen(event *corev1.Event) metav1.Time {
	switch {
	case event.Series != nil:
		return metav1.Time{Time: event.Series.LastObservedTime.Time}
	case !event.LastTimestamp.IsZero():
		return event.LastTimestamp
	case !event.EventTime.IsZero():
		return metav1.Time{Time: event.EventTime.Time}
	case !event.FirstTimestamp.IsZero():
		return event.FirstTimestamp
	}
	return event.CreationTimestamp
}

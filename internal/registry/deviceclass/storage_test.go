package deviceclass

import (
	"context"
	"testing"

	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"

	resourceapi "github.com/draplane/draplane/apis/resource"
	resourcev1 "github.com/draplane/draplane/apis/resource/v1"
	"github.com/draplane/draplane/internal/testing/apitest"
	"github.com/draplane/draplane/internal/testing/etcdtest"
)

func TestStorage(t *testing.T) {
	scheme := apitest.Scheme()
	storage, err := NewREST(scheme, etcdtest.RESTOptionsGetter(t, scheme, resourcev1.SchemeGroupVersion))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(storage.Destroy)
	ctx := genericapirequest.WithNamespace(context.Background(), "")

	class := testClass(func(c *resourceapi.DeviceClass) { c.ResourceVersion = "" })
	if _, err := storage.Create(ctx, class, rest.ValidateAllObjectFunc, &metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	list, err := storage.List(ctx, &metainternalversion.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	table, err := storage.ConvertToTable(ctx, list, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(table.Rows) != 1 || table.Rows[0].Cells[0] != "gpu.example.com" || table.Rows[0].Cells[1] != int64(1) {
		t.Errorf("table rows %+v", table.Rows)
	}
	if _, _, err := storage.Delete(ctx, "gpu.example.com", rest.ValidateAllObjectFunc, &metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := storage.ShortNames(); len(got) != 1 || got[0] != "dvc" {
		t.Errorf("short names %v", got)
	}
}

package resource_test

import (
	"bufio"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"

	v1 "github.com/draplane/draplane/apis/resource/v1"
	"github.com/draplane/draplane/apis/resource/v1beta1"
)

// leftOut lists upstream 1.37 fields (type.Field, or Type.* for a whole
// type) that we do not serve, with the reason; since the alpha fields are
// served behind their feature gates there are none. Everything else in the
// inventory must be present with the same JSON name, and we may not add
// fields upstream does not have.
var leftOut = map[string]string{}

// inventoryLine matches "Type:  Field GoType `json:..." and, for embedded
// structs, "Type:  EmbeddedType `json:...".
var inventoryLine = regexp.MustCompile("^([A-Za-z]+):\\s+(\\S+)(?:\\s+([^`\\s]+))?\\s+`json:\"([^\"]*)\"")

type wireField struct{ goType, json string }

func readInventory(t *testing.T, file string) map[string]wireField {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", "upstream", file))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fields := map[string]wireField{}
	scanner := bufio.NewScanner(f)
	for scanner.Scan() {
		line := scanner.Text()
		if strings.HasPrefix(line, "#") || line == "" {
			continue
		}
		m := inventoryLine.FindStringSubmatch(line)
		if m == nil {
			t.Fatalf("cannot parse inventory line %q", line)
		}
		goType := m[3]
		if goType == "" { // embedded: the field is named after its type
			goType = m[2]
		}
		fields[m[1]+"."+m[2]] = wireField{goType: goType, json: m[4]}
	}
	return fields
}

var packageQualifier = regexp.MustCompile(`[A-Za-z0-9_]+\.`)

// unqualified drops package names so "map[v1.QualifiedName]v1.Counter"
// and upstream's "map[QualifiedName]Counter" compare equal.
func unqualified(goType string) string { return packageQualifier.ReplaceAllString(goType, "") }

func isLeftOut(key string) bool {
	if _, ok := leftOut[key]; ok {
		return true
	}
	typeName, _, _ := strings.Cut(key, ".")
	_, ok := leftOut[typeName+".*"]
	return ok
}

// ourFields walks every struct reachable from the roots and returns
// Type.Field -> Go type and json tag, skipping metav1 and core types.
func ourFields(roots ...any) map[string]wireField {
	fields := map[string]wireField{}
	seen := map[reflect.Type]bool{}
	var walk func(reflect.Type)
	walk = func(t reflect.Type) {
		for t.Kind() == reflect.Pointer || t.Kind() == reflect.Slice || t.Kind() == reflect.Map {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct || seen[t] || !strings.Contains(t.PkgPath(), "draplane") {
			return
		}
		seen[t] = true
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			if f.Name == "TypeMeta" || f.Name == "ObjectMeta" || f.Name == "ListMeta" {
				continue
			}
			fields[t.Name()+"."+f.Name] = wireField{goType: f.Type.String(), json: f.Tag.Get("json")}
			walk(f.Type)
		}
	}
	for _, r := range roots {
		walk(reflect.TypeOf(r))
	}
	return fields
}

// notUpstream lists the kinds we serve that resource.k8s.io does not have,
// so the parity check below has nothing to compare them with. Every other
// kind of a served version must be a root of the check.
var notUpstream = map[string]string{
	// A computed, read-only view of each pool's usage (resourcepools),
	// served from memory and never stored. Upstream's nearest relative,
	// ResourcePoolStatusRequest, is an alpha request object of another
	// shape, so there is no inventory to hold it to.
	"ResourcePoolUsage": "draplane only: computed usage of a pool",
}

// TestEveryKindIsCompared fails when a kind is added to a served version
// without being compared with upstream or listed in notUpstream.
func TestEveryKindIsCompared(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := v1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := v1beta1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	compared := map[string]bool{}
	for _, roots := range parityRoots {
		for _, r := range roots.roots {
			compared[roots.version+"/"+strings.TrimSuffix(reflect.TypeOf(r).Name(), "List")] = true
		}
	}
	for gvk := range scheme.AllKnownTypes() {
		if gvk.Group != v1.GroupName || strings.HasSuffix(gvk.Kind, "List") || gvk.Version == runtime.APIVersionInternal {
			continue
		}
		switch gvk.Kind {
		case "WatchEvent", "ListOptions", "GetOptions", "DeleteOptions", "CreateOptions", "UpdateOptions", "PatchOptions":
			continue
		}
		if compared[gvk.Version+"/"+gvk.Kind] {
			continue
		}
		if _, ok := notUpstream[gvk.Kind]; !ok {
			t.Errorf("%s is served but neither compared with upstream nor listed in notUpstream", gvk)
		}
	}
}

// parityRoots are the kinds compared with upstream's inventory per version.
var parityRoots = []struct {
	version, inventory string
	roots              []any
}{
	{"v1", "resource.k8s.io-v1-fields.txt", []any{v1.DeviceClassList{}, v1.ResourceClaimList{}, v1.ResourceClaimTemplateList{}, v1.ResourceSliceList{}, v1.DeviceTaintRuleList{}}},
	{"v1beta1", "resource.k8s.io-v1beta1-fields.txt", []any{v1beta1.DeviceClassList{}, v1beta1.ResourceClaimList{}, v1beta1.ResourceClaimTemplateList{}, v1beta1.ResourceSliceList{}}},
}

func TestWireParityWithUpstream(t *testing.T) {
	for _, tc := range parityRoots {
		t.Run(tc.inventory, func(t *testing.T) {
			upstream := readInventory(t, tc.inventory)
			ours := ourFields(tc.roots...)
			var present, missing, skipped []string
			for key, want := range upstream {
				got, ok := ours[key]
				switch {
				case isLeftOut(key):
					if ok {
						t.Errorf("%s is listed as left out but present", key)
					}
					skipped = append(skipped, key)
				case !ok:
					missing = append(missing, key)
				case got.json != want.json:
					t.Errorf("%s: json tag %q, upstream %q", key, got.json, want.json)
				case unqualified(got.goType) != unqualified(want.goType):
					t.Errorf("%s: Go type %s, upstream %s", key, got.goType, want.goType)
				default:
					present = append(present, key)
				}
			}
			sort.Strings(missing)
			for _, key := range missing {
				t.Errorf("upstream field %s (json %q) is missing", key, upstream[key].json)
			}
			for key := range ours {
				if _, ok := upstream[key]; !ok {
					t.Errorf("%s is not an upstream field", key)
				}
			}
			t.Logf("%d upstream fields present, %d left out", len(present), len(skipped))
		})
	}
}

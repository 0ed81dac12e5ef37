// Package patcherrors makes a patch that cannot be applied to the stored
// object the client's error, answered 422 with the field it failed at.
//
// The generic PATCH handler reports many strategic-merge failures (a list
// entry without its merge key, an entry that is not an object, an unknown
// $patch directive, a $setElementOrder list that does not match) as 500
// Internal Server Error, and a JSON patch operation that does not apply as
// 422 without saying which operation or why. The handler keeps neither the
// patch nor the field. WithPatch keeps the body of such requests in the
// request context; the stores' Update (Store, or Guard for stores of their
// own) hands a failed patch back to Explain, which applies it again to the
// same object, one field and one list entry at a time, to find where it
// fails.
package patcherrors

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"strings"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/endpoints/request"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"
	kjson "sigs.k8s.io/json"
)

// Scheme converts stored objects to the version a request names.
type Scheme interface {
	runtime.ObjectConvertor
	runtime.ObjectTyper
}

// patchRequest is what WithPatch keeps of a PATCH request.
type patchRequest struct {
	patchType types.PatchType
	body      []byte
	scheme    Scheme
}

type contextKey struct{}

// WithPatch keeps the body of JSON-patch, strategic-merge-patch and apply
// requests up to maxBytes in the request context for Explain. Bigger bodies pass
// untouched (the handler refuses them). It belongs inside authentication:
// only requests that may patch are read.
func WithPatch(handler http.Handler, scheme Scheme, maxBytes int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		if req.Method != http.MethodPatch || req.Body == nil {
			handler.ServeHTTP(w, req)
			return
		}
		mediaType, _, err := mime.ParseMediaType(req.Header.Get("Content-Type"))
		patchType := types.PatchType(mediaType)
		if err != nil || patchType != types.JSONPatchType && patchType != types.StrategicMergePatchType && patchType != types.ApplyYAMLPatchType {
			handler.ServeHTTP(w, req)
			return
		}
		limit := maxBytes
		if limit <= 0 {
			limit = 3 << 20
		}
		body, err := io.ReadAll(io.LimitReader(req.Body, limit+1))
		if err != nil || int64(len(body)) > limit {
			// Let the handler meet the same failure or size.
			req.Body = readCloser{io.MultiReader(bytes.NewReader(body), errorReader{err}, req.Body), req.Body}
			handler.ServeHTTP(w, req)
			return
		}
		req.Body = readCloser{bytes.NewReader(body), req.Body}
		ctx := context.WithValue(req.Context(), contextKey{}, &patchRequest{patchType: patchType, body: body, scheme: scheme})
		handler.ServeHTTP(w, req.WithContext(ctx))
	})
}

type readCloser struct {
	io.Reader
	io.Closer
}

// errorReader returns err once it is reached, or EOF without one.
type errorReader struct{ err error }

func (r errorReader) Read([]byte) (int, error) {
	if r.err != nil {
		return 0, r.err
	}
	return 0, io.EOF
}

// Store is a generic store whose updates explain failed patches.
type Store struct {
	*genericregistry.Store
}

// Update is the generic store's update with Guard around objInfo.
func (s Store) Update(ctx context.Context, name string, objInfo rest.UpdatedObjectInfo, createValidation rest.ValidateObjectFunc, updateValidation rest.ValidateObjectUpdateFunc, forceAllowCreate bool, options *metav1.UpdateOptions) (runtime.Object, bool, error) {
	return s.Store.Update(ctx, name, Guard(objInfo), createValidation, updateValidation, forceAllowCreate, options)
}

// Guard wraps the updated-object function a PATCH handler passes to a
// store: when applying the patch fails, the error is replaced by the one
// Explain finds.
func Guard(objInfo rest.UpdatedObjectInfo) rest.UpdatedObjectInfo {
	return guarded{objInfo}
}

type guarded struct {
	rest.UpdatedObjectInfo
}

func (g guarded) UpdatedObject(ctx context.Context, oldObj runtime.Object) (runtime.Object, error) {
	obj, err := g.UpdatedObjectInfo.UpdatedObject(ctx, oldObj)
	if err == nil || !unexplained(err) {
		return obj, err
	}
	if explained := Explain(ctx, oldObj); explained != nil {
		return nil, explained
	}
	if refused := explainApply(ctx, err); refused != nil {
		return nil, refused
	}
	return obj, err
}

// explainApply answers 400 for a server-side apply whose configuration
// does not fit the schema (an unknown field, a list where an object
// belongs): the field manager reports it without an API status, as 500.
// Its message names the field.
func explainApply(ctx context.Context, err error) error {
	p, ok := ctx.Value(contextKey{}).(*patchRequest)
	if !ok || p.patchType != types.ApplyYAMLPatchType {
		return nil
	}
	var status apierrors.APIStatus
	if errors.As(err, &status) || !strings.Contains(err.Error(), "failed to create typed patch object") {
		return nil
	}
	return apierrors.NewBadRequest(err.Error())
}

// unexplained is an error that is not the client's yet (no API status), or
// a 400 or 422 that does not say which field.
func unexplained(err error) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return true
	}
	s := status.Status()
	if s.Code != http.StatusBadRequest && s.Code != http.StatusUnprocessableEntity {
		return false
	}
	return s.Details == nil || len(s.Details.Causes) == 0
}

// maxAttempts bounds how often Explain applies parts of one patch.
const maxAttempts = 256

// Explain applies the patch of the request in ctx to old again and, if that
// fails, returns a 422 naming the field (or, for a JSON patch, the
// operation's path) it fails at. It returns nil when ctx holds no patch or
// the patch applies: then the failure was not the patch's.
func Explain(ctx context.Context, old runtime.Object) error {
	p, ok := ctx.Value(contextKey{}).(*patchRequest)
	if !ok {
		return nil
	}
	info, ok := request.RequestInfoFrom(ctx)
	if !ok {
		return nil
	}
	kinds, _, err := p.scheme.ObjectKinds(old)
	if err != nil || len(kinds) == 0 {
		return nil
	}
	accessor, err := meta.Accessor(old)
	if err != nil {
		return nil
	}
	versioned, err := p.scheme.ConvertToVersion(old.DeepCopyObject(), schema.GroupVersion{Group: info.APIGroup, Version: info.APIVersion})
	if err != nil {
		return nil
	}
	var errs field.ErrorList
	switch p.patchType {
	case types.JSONPatchType:
		errs = explainJSONPatch(versioned, p.body)
	case types.StrategicMergePatchType:
		errs = explainStrategicMerge(versioned, p.body)
	}
	// An apply is not applied again: explainApply reads its error.
	if len(errs) == 0 {
		return nil
	}
	return apierrors.NewInvalid(kinds[0].GroupKind(), accessor.GetName(), errs)
}

// explainJSONPatch applies the operations one by one and reports the
// first that does not apply, at the path it names.
func explainJSONPatch(versioned runtime.Object, body []byte) field.ErrorList {
	doc, err := json.Marshal(versioned)
	if err != nil {
		return nil
	}
	ops, err := jsonpatch.DecodePatch(body)
	if err != nil || len(ops) > 10000 {
		return nil
	}
	for i, op := range ops {
		next, err := jsonpatch.Patch{op}.Apply(doc)
		if err != nil {
			path, _ := op.Path()
			return field.ErrorList{field.Invalid(pointerPath(path), fmt.Sprintf("%s operation #%d", op.Kind(), i), oneLine(err.Error()))}
		}
		doc = next
	}
	return nil
}

// pointerPath turns a JSON pointer into a field path: /status/reservedFor/7
// is status.reservedFor[7].
func pointerPath(pointer string) *field.Path {
	var path *field.Path
	for i, part := range strings.Split(strings.TrimPrefix(pointer, "/"), "/") {
		part = strings.NewReplacer("~1", "/", "~0", "~").Replace(part)
		index, err := strconv.Atoi(part)
		switch {
		case i == 0:
			path = field.NewPath(part)
		case err == nil && index >= 0:
			path = path.Index(index)
		default:
			path = path.Child(part)
		}
	}
	return path
}

// explainStrategicMerge narrows the failure down to one field, and within
// a list to one entry, by applying parts of the patch to the same object.
func explainStrategicMerge(versioned runtime.Object, body []byte) field.ErrorList {
	original, err := runtime.DefaultUnstructuredConverter.ToUnstructured(versioned)
	if err != nil {
		return nil
	}
	var patch map[string]interface{}
	if err := kjson.UnmarshalCaseSensitivePreserveInts(body, &patch); err != nil {
		return nil
	}
	lookup, err := strategicpatch.NewPatchMetaFromStruct(versioned)
	if err != nil {
		return nil
	}
	attempts := maxAttempts
	path, err := locate(original, patch, lookup, nil, &attempts)
	switch {
	case err == nil:
		return nil
	case path == nil:
		path = field.NewPath("patch")
	}
	return field.ErrorList{field.Invalid(path, field.OmitValueType{}, oneLine(err.Error()))}
}

// locate returns where in patch applying it to original fails, and why;
// nil and nil when it applies (or the attempts are used up).
func locate(original, patch map[string]interface{}, lookup strategicpatch.LookupPatchMeta, path *field.Path, attempts *int) (*field.Path, error) {
	fails := func(original, patch map[string]interface{}) error {
		if *attempts <= 0 {
			return nil
		}
		*attempts--
		_, err := strategicpatch.StrategicMergeMapPatchUsingLookupPatchMeta(
			runtime.DeepCopyJSON(original), runtime.DeepCopyJSON(patch), lookup)
		return err
	}
	err := fails(original, patch)
	if err == nil {
		return nil, nil
	}
	// A field and the directives about it ($setElementOrder/<field>,
	// $deleteFromPrimitiveList/<field>) are tried together.
	groups := map[string][]string{}
	for key := range patch {
		name := key
		for _, prefix := range []string{"$setElementOrder/", "$deleteFromPrimitiveList/"} {
			name = strings.TrimPrefix(name, prefix)
		}
		groups[name] = append(groups[name], key)
	}
	names := make([]string, 0, len(groups))
	for name := range groups {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		part := map[string]interface{}{}
		for _, key := range groups[name] {
			part[key] = patch[key]
		}
		partErr := fails(original, part)
		if partErr == nil {
			continue
		}
		at := childPath(path, name)
		switch value := patch[name].(type) {
		case map[string]interface{}:
			if inner, ok := original[name].(map[string]interface{}); ok {
				if innerLookup, _, err := lookup.LookupPatchMetadataForStruct(name); err == nil {
					if deeper, deeperErr := locate(inner, value, innerLookup, at, attempts); deeperErr != nil {
						return deeper, deeperErr
					}
				}
			}
		case []interface{}:
			for i, entry := range value {
				if entryErr := fails(original, map[string]interface{}{name: []interface{}{entry}}); entryErr != nil {
					return at.Index(i), entryErr
				}
			}
		}
		return at, partErr
	}
	return path, err
}

func childPath(path *field.Path, name string) *field.Path {
	if path == nil {
		return field.NewPath(name)
	}
	return path.Child(name)
}

// oneLine folds the multi-line messages of the patch libraries.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

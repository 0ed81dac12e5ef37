package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"
)

// Compare returns every change from old to new that can break a client of
// old, one line each: "<where>: <what>". Additions are not reported.
//
// Served versions and kinds come from served.json; a kind may go only in
// the release its lifecycle announced (removed=), and only when a frozen
// release had already marked it deprecated. Every served kind (and its
// list) is compared field by field from the kind's schema down, following
// references, so a schema moved or renamed in the document does not count,
// only what a client sees at a field path.
func Compare(old, new *Release) []string {
	c := &comparer{old: old, new: new}
	gvs := sortedKeys(old.Served)
	for _, gv := range gvs {
		newKinds, served := new.Served[gv]
		oldKinds := old.Served[gv]
		if !served {
			for _, kind := range sortedKeys(oldKinds) {
				if reason := c.removalForbidden(oldKinds[kind]); reason != "" {
					c.report("%s: served version removed (%s served it: %s)", gv, kind, reason)
					break
				}
			}
			continue
		}
		removedResources := map[string]bool{}
		for _, kind := range sortedKeys(oldKinds) {
			if _, ok := newKinds[kind]; ok {
				continue
			}
			removedResources[oldKinds[kind].Resource] = true
			if reason := c.removalForbidden(oldKinds[kind]); reason != "" {
				c.report("%s %s: served kind removed (%s)", gv, kind, reason)
			}
		}
		oldDoc, newDoc := old.Docs[gv], new.Docs[gv]
		if oldDoc == nil || newDoc == nil {
			continue
		}
		c.comparePaths(gv, oldDoc, newDoc, removedResources)
		for _, kind := range sortedKeys(oldKinds) {
			if _, ok := newKinds[kind]; !ok {
				continue
			}
			for _, k := range []string{kind, kind + "List"} {
				c.compareKind(gv, k, oldDoc, newDoc)
			}
		}
	}
	sort.Strings(c.breaks)
	return slices.Compact(c.breaks)
}

type comparer struct {
	old, new *Release
	breaks   []string
}

func (c *comparer) report(format string, args ...any) {
	c.breaks = append(c.breaks, fmt.Sprintf(format, args...))
}

// removalForbidden says why a kind of the old release may not be gone
// yet, or "" when its deprecation period is over: it was deprecated in a
// frozen release, and the release after the old one is (or is past) the
// one its lifecycle named for the removal.
func (c *comparer) removalForbidden(kind ServedKind) string {
	if kind.Deprecated == "" {
		return "not deprecated"
	}
	major, minor, _, ok := ParseRelease(c.old.Name)
	if !ok {
		return fmt.Sprintf("%q is not a release, so no deprecation period has passed", c.old.Name)
	}
	depMajor, depMinor, ok := parseMajorMinor(kind.Deprecated)
	if !ok || depMajor > major || (depMajor == major && depMinor > minor) {
		return fmt.Sprintf("deprecated in %s, after release %s", kind.Deprecated, c.old.Name)
	}
	remMajor, remMinor, ok := parseMajorMinor(kind.Removed)
	if !ok {
		return fmt.Sprintf("deprecated in %s with no removal release", kind.Deprecated)
	}
	if remMajor > major || (remMajor == major && remMinor > minor+1) {
		return fmt.Sprintf("deprecated in %s, to be served until %s", kind.Deprecated, kind.Removed)
	}
	return ""
}

var methods = []string{"get", "put", "post", "delete", "patch", "head", "options"}

// comparePaths reports every operation of old that new no longer has,
// except those of removed kinds (reported as such).
func (c *comparer) comparePaths(gv string, oldDoc, newDoc *Document, removedResources map[string]bool) {
	for _, path := range sortedKeys(oldDoc.Paths) {
		if servesResource(path, removedResources) {
			continue
		}
		for _, method := range methods {
			if _, ok := oldDoc.Paths[path][method]; !ok {
				continue
			}
			if _, ok := newDoc.Paths[path][method]; !ok {
				c.report("%s %s %s: operation removed", gv, strings.ToUpper(method), path)
			}
		}
	}
}

func servesResource(path string, resources map[string]bool) bool {
	for _, segment := range strings.Split(path, "/") {
		if resources[segment] {
			return true
		}
	}
	return false
}

// findKind returns the schema published for gv's kind.
func findKind(doc *Document, gv, kind string) *Schema {
	group, version, _ := strings.Cut(gv, "/")
	for _, name := range sortedKeys(doc.Components.Schemas) {
		s := doc.Components.Schemas[name]
		for _, gvk := range s.GVKs {
			if gvk.Group == group && gvk.Version == version && gvk.Kind == kind {
				return s
			}
		}
	}
	return nil
}

func (c *comparer) compareKind(gv, kind string, oldDoc, newDoc *Document) {
	oldSchema := findKind(oldDoc, gv, kind)
	if oldSchema == nil {
		return
	}
	newSchema := findKind(newDoc, gv, kind)
	if newSchema == nil {
		c.report("%s %s: schema removed", gv, kind)
		return
	}
	w := &walker{c: c, prefix: gv + " " + kind, oldDoc: oldDoc, newDoc: newDoc}
	w.compare("", oldSchema, newSchema, nil)
}

type walker struct {
	c              *comparer
	prefix         string
	oldDoc, newDoc *Document
}

type pair struct{ old, new *Schema }

func (w *walker) report(path, format string, args ...any) {
	where := w.prefix
	if path != "" {
		where += " " + path
	}
	w.c.report("%s: %s", where, fmt.Sprintf(format, args...))
}

// deref follows $ref, also in the allOf: [{$ref}] wrapper kube-openapi
// puts around references that carry a default or a description.
func deref(doc *Document, s *Schema) *Schema {
	for range 32 {
		switch {
		case s.Ref != "":
			target := doc.Components.Schemas[strings.TrimPrefix(s.Ref, "#/components/schemas/")]
			if target == nil {
				return s
			}
			s = target
		case len(s.AllOf) == 1 && s.Type == "" && len(s.Properties) == 0:
			s = s.AllOf[0]
		default:
			return s
		}
	}
	return s
}

// compare walks old and new at one field path. stack holds the schema
// pairs being compared further up, which ends recursive types.
func (w *walker) compare(path string, oldS, newS *Schema, stack []pair) {
	o, n := deref(w.oldDoc, oldS), deref(w.newDoc, newS)
	// A field's default sits next to its reference, or on the schema.
	if oldDefault, newDefault := effectiveDefault(oldS, o), effectiveDefault(newS, n); !jsonEqual(oldDefault, newDefault) {
		w.report(path, "default changed from %s to %s", show(oldDefault), show(newDefault))
	}
	p := pair{o, n}
	if slices.Contains(stack, p) {
		return
	}
	stack = append(stack, p)

	if o.Type != n.Type || o.IntOrString != n.IntOrString {
		w.report(path, "type changed from %s to %s", typeName(o), typeName(n))
		return
	}
	if o.Format != n.Format {
		w.report(path, "format changed from %q to %q", o.Format, n.Format)
	}
	if o.Nullable && !n.Nullable {
		w.report(path, "no longer nullable")
	}
	if o.Embedded != n.Embedded {
		w.report(path, "x-kubernetes-embedded-resource changed from %t to %t", o.Embedded, n.Embedded)
	}
	if o.PreserveUnknown != nil && *o.PreserveUnknown && (n.PreserveUnknown == nil || !*n.PreserveUnknown) {
		w.report(path, "x-kubernetes-preserve-unknown-fields removed")
	}
	w.compareEnum(path, o, n)
	w.compareValidation(path, o, n)

	if listType(o) != listType(n) {
		w.report(path, "list type (x-kubernetes-list-type) changed from %q to %q", listType(o), listType(n))
	}
	if !slices.Equal(o.ListMapKeys, n.ListMapKeys) {
		w.report(path, "list map keys (x-kubernetes-list-map-keys) changed from %q to %q", o.ListMapKeys, n.ListMapKeys)
	}
	if o.MapType != n.MapType {
		w.report(path, "map type (x-kubernetes-map-type) changed from %q to %q", o.MapType, n.MapType)
	}

	for _, name := range n.Required {
		if slices.Contains(o.Required, name) {
			continue
		}
		if _, existed := o.Properties[name]; existed {
			w.report(join(path, name), "optional field made required")
		} else {
			w.report(join(path, name), "required field added")
		}
	}
	for _, name := range sortedKeys(o.Properties) {
		newProp, ok := n.Properties[name]
		if !ok {
			w.report(join(path, name), "field removed (or renamed)")
			continue
		}
		w.compare(join(path, name), o.Properties[name], newProp, stack)
	}
	switch {
	case o.Items != nil && n.Items != nil:
		w.compare(path+"[]", o.Items, n.Items, stack)
	case o.Items != nil:
		w.report(path, "list items no longer described")
	}
	oldValues, newValues := o.additional(), n.additional()
	switch {
	case oldValues != nil && newValues != nil:
		w.compare(path+"{}", oldValues, newValues, stack)
	case oldValues != nil:
		w.report(path, "map values no longer described")
	}
}

func (w *walker) compareEnum(path string, o, n *Schema) {
	if len(n.Enum) == 0 {
		return
	}
	if len(o.Enum) == 0 {
		if !w.c.old.WithoutEnums {
			w.report(path, "enum added (validation tightened)")
		}
		return
	}
	for _, value := range o.Enum {
		if !slices.ContainsFunc(n.Enum, func(v json.RawMessage) bool { return jsonEqual(v, value) }) {
			w.report(path, "enum value %s removed", value)
		}
	}
}

// compareValidation reports every bound that accepts less than before.
func (w *walker) compareValidation(path string, o, n *Schema) {
	upper := func(name string, old, new *int64) {
		switch {
		case new == nil:
		case old == nil:
			w.report(path, "%s added (%d): validation tightened", name, *new)
		case *new < *old:
			w.report(path, "%s lowered from %d to %d: validation tightened", name, *old, *new)
		}
	}
	lower := func(name string, old, new *int64) {
		switch {
		case new == nil || *new == 0:
		case old == nil:
			w.report(path, "%s added (%d): validation tightened", name, *new)
		case *new > *old:
			w.report(path, "%s raised from %d to %d: validation tightened", name, *old, *new)
		}
	}
	upper("maxItems", o.MaxItems, n.MaxItems)
	upper("maxLength", o.MaxLength, n.MaxLength)
	upper("maxProperties", o.MaxProperties, n.MaxProperties)
	lower("minItems", o.MinItems, n.MinItems)
	lower("minLength", o.MinLength, n.MinLength)
	lower("minProperties", o.MinProperties, n.MinProperties)

	switch {
	case n.Maximum == nil:
	case o.Maximum == nil:
		w.report(path, "maximum added (%g): validation tightened", *n.Maximum)
	case *n.Maximum < *o.Maximum || (*n.Maximum == *o.Maximum && n.ExclusiveMaximum && !o.ExclusiveMaximum):
		w.report(path, "maximum lowered from %s to %s: validation tightened", bound(*o.Maximum, o.ExclusiveMaximum), bound(*n.Maximum, n.ExclusiveMaximum))
	}
	switch {
	case n.Minimum == nil:
	case o.Minimum == nil:
		w.report(path, "minimum added (%g): validation tightened", *n.Minimum)
	case *n.Minimum > *o.Minimum || (*n.Minimum == *o.Minimum && n.ExclusiveMinimum && !o.ExclusiveMinimum):
		w.report(path, "minimum raised from %s to %s: validation tightened", bound(*o.Minimum, o.ExclusiveMinimum), bound(*n.Minimum, n.ExclusiveMinimum))
	}
	switch {
	case n.MultipleOf == nil:
	case o.MultipleOf == nil || *o.MultipleOf != *n.MultipleOf:
		w.report(path, "multipleOf changed from %s to %g: validation tightened", showFloat(o.MultipleOf), *n.MultipleOf)
	}
	switch {
	case n.Pattern == "" || n.Pattern == o.Pattern:
	case o.Pattern == "":
		w.report(path, "pattern added (%q): validation tightened", n.Pattern)
	default:
		w.report(path, "pattern changed from %q to %q: validation tightened", o.Pattern, n.Pattern)
	}
	for _, rule := range n.Validations {
		if !slices.ContainsFunc(o.Validations, func(r json.RawMessage) bool { return jsonEqual(r, rule) }) {
			w.report(path, "validation rule (x-kubernetes-validations) added or changed: %s: validation tightened", compact(rule))
		}
	}
}

// effectiveDefault is the default of a field: the one next to its
// reference, else the one of the schema it refers to.
func effectiveDefault(field, target *Schema) json.RawMessage {
	if len(field.Default) > 0 {
		return field.Default
	}
	return target.Default
}

// listType is a list's x-kubernetes-list-type; a list without one is
// atomic to server-side apply.
func listType(s *Schema) string {
	if s.Type == "array" && s.ListType == "" {
		return "atomic"
	}
	return s.ListType
}

func typeName(s *Schema) string {
	switch {
	case s.IntOrString:
		return "int-or-string"
	case s.Type == "":
		return "any"
	}
	return s.Type
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

func bound(v float64, exclusive bool) string {
	if exclusive {
		return fmt.Sprintf("%g (exclusive)", v)
	}
	return fmt.Sprintf("%g", v)
}

func showFloat(v *float64) string {
	if v == nil {
		return "none"
	}
	return fmt.Sprintf("%g", *v)
}

func show(raw json.RawMessage) string {
	if len(raw) == 0 {
		return "none"
	}
	return compact(raw)
}

// compact renders a JSON value on one line, without escaping <, > and &
// (CEL rules are full of them).
func compact(raw json.RawMessage) string {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return string(raw)
	}
	var buf bytes.Buffer
	encoder := json.NewEncoder(&buf)
	encoder.SetEscapeHTML(false)
	if err := encoder.Encode(v); err != nil {
		return string(raw)
	}
	return strings.TrimSuffix(buf.String(), "\n")
}

// jsonEqual compares two JSON values, ignoring layout and key order.
func jsonEqual(a, b json.RawMessage) bool {
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b)
	}
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return bytes.Equal(a, b)
	}
	xs, _ := json.Marshal(x)
	ys, _ := json.Marshal(y)
	return bytes.Equal(xs, ys)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Package updatecheck runs a check of updates inside a store, where the
// API handlers run validating admission: in the updateValidation of the
// store's Update, after the strategy prepared the new object, with copies
// of the new and the stored object. Updates, patches and applies, dry run
// or not, all pass there. A check that runs there instead of in the
// admission chain keeps the chain from handling updates, which would make
// the handlers decode every update's managedFields again after mutating
// admission, for every resource.
package updatecheck

import (
	"context"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/registry/rest"
)

// Before returns updateValidation with check run first; a refusal of
// check is the update's error. A nil check or updateValidation is left
// out.
func Before(check, updateValidation rest.ValidateObjectUpdateFunc) rest.ValidateObjectUpdateFunc {
	switch {
	case check == nil:
		return updateValidation
	case updateValidation == nil:
		return check
	}
	return func(ctx context.Context, obj, old runtime.Object) error {
		if err := check(ctx, obj, old); err != nil {
			return err
		}
		return updateValidation(ctx, obj, old)
	}
}

package allocator

import (
	"context"
	"errors"
	"strings"

	resourceapi "github.com/draplane/draplane/apis/resource"
)

// fakeCompiler understands a tiny selector language so that tests don't
// depend on the CEL environment:
//
//	true, false        constant
//	error              evaluation fails for every device
//	invalid            does not compile
//	KEY=VALUE          string attribute KEY (as published) equals VALUE
//	!KEY=VALUE         negation
//	errorif:KEY=VALUE  evaluation fails where KEY=VALUE, else match
type fakeCompiler struct{}

type fakeProgram func(SelectorDevice) (bool, error)

func (p fakeProgram) Matches(_ context.Context, d SelectorDevice) (bool, error) { return p(d) }

var errFakeEval = errors.New("no such key: model")

func (fakeCompiler) Compile(expr string) (SelectorProgram, error) {
	return compileFake(expr)
}

func compileFake(expr string) (fakeProgram, error) {
	switch expr {
	case "true":
		return func(SelectorDevice) (bool, error) { return true, nil }, nil
	case "false":
		return func(SelectorDevice) (bool, error) { return false, nil }, nil
	case "error":
		return func(SelectorDevice) (bool, error) { return false, errFakeEval }, nil
	case "invalid":
		return nil, errors.New("syntax error")
	}
	if rest, ok := strings.CutPrefix(expr, "errorif:"); ok {
		inner, err := compileFake(rest)
		if err != nil {
			return nil, err
		}
		return func(d SelectorDevice) (bool, error) {
			if ok, _ := inner(d); ok {
				return false, errFakeEval
			}
			return true, nil
		}, nil
	}
	if rest, ok := strings.CutPrefix(expr, "!"); ok {
		inner, err := compileFake(rest)
		if err != nil {
			return nil, err
		}
		return func(d SelectorDevice) (bool, error) {
			ok, err := inner(d)
			return !ok && err == nil, err
		}, nil
	}
	key, value, ok := strings.Cut(expr, "=")
	if !ok {
		return nil, errors.New("cannot parse " + expr)
	}
	return func(d SelectorDevice) (bool, error) {
		a, ok := d.Attributes[resourceapi.QualifiedName(key)]
		return ok && a.StringValue != nil && *a.StringValue == value, nil
	}, nil
}

package fielderr_test

import (
	"errors"
	"fmt"

	"github.com/weirhq/weir/pkg/fielderr"
)

// ErrInvalid is the sentinel of a package that reports field errors.
var ErrInvalid = errors.New("example: invalid")

// invalid is that package's fielderr.Kind.
type invalid struct{}

func (invalid) Sentinel() error { return ErrInvalid }

// ValidationError is its error type, as rule.ValidationError is rule's.
type ValidationError = fielderr.List[invalid]

func Example() {
	var r fielderr.Report[invalid]
	rules := fielderr.Field("", "rules")
	r.Fail(fielderr.Index(rules, 0), "want an object, got a list")
	r.Add(fielderr.Field(fielderr.Index(rules, 0), "limit"), "required") // inside a failed path: dropped
	r.Add(fielderr.Key(fielderr.Field(fielderr.Index(rules, 1), "match"), "x.y"), "unknown dimension")

	err := fmt.Errorf("load rules: %w", r.Err())
	fmt.Println(err)
	fmt.Println(errors.Is(err, ErrInvalid))
	if ve, ok := errors.AsType[*ValidationError](err); ok {
		fmt.Println(ve.Paths())
	}
	// Output:
	// load rules: rules[0]: want an object, got a list
	// rules[1].match["x.y"]: unknown dimension
	// true
	// [rules[0] rules[1].match["x.y"]]
}

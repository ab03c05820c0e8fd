package fielderr_test

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/weirhq/weir/pkg/fielderr"
)

var (
	errA = errors.New("a: invalid")
	errB = errors.New("b: invalid")
)

type kindA struct{}

func (kindA) Sentinel() error { return errA }

type kindB struct{}

func (kindB) Sentinel() error { return errB }

func TestFieldErrorError(t *testing.T) {
	tests := []struct {
		name string
		fe   fielderr.FieldError
		want string
	}{
		{"path and reason", fielderr.FieldError{Path: "rules[2].limit", Reason: "must be above 0"}, "rules[2].limit: must be above 0"},
		{"document as a whole", fielderr.FieldError{Reason: "want an object, got a list"}, "want an object, got a list"},
		{"empty", fielderr.FieldError{}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.fe.Error(); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestListError(t *testing.T) {
	two := []fielderr.FieldError{{Path: "name", Reason: "required"}, {Reason: "bad"}}
	tests := []struct {
		name string
		l    fielderr.List[kindA]
		want string
	}{
		{"empty", fielderr.List[kindA]{}, ""},
		{"one per line", fielderr.List[kindA]{Errors: two}, "name: required\nbad"},
		{"omitted", fielderr.List[kindA]{Errors: two, Omitted: 7}, "name: required\nbad\n(and 7 more problems)"},
		{"only omitted", fielderr.List[kindA]{Omitted: 3}, "(and 3 more problems)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.l.Error(); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestListIs(t *testing.T) {
	a := fmt.Errorf("load x: %w", &fielderr.List[kindA]{Errors: []fielderr.FieldError{{Reason: "bad"}}})
	b := fmt.Errorf("load y: %w", &fielderr.List[kindB]{Errors: []fielderr.FieldError{{Reason: "bad"}}})
	tests := []struct {
		name   string
		err    error
		target error
		want   bool
	}{
		{"own sentinel", a, errA, true},
		{"other kind's sentinel", a, errB, false},
		{"other kind, own sentinel", b, errB, true},
		{"other kind, other sentinel", b, errA, false},
		{"unrelated error", a, errors.New("a: invalid"), false},
		{"literal without a Report", &fielderr.List[kindA]{}, errA, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := errors.Is(tt.err, tt.target); got != tt.want {
				t.Errorf("errors.Is(%q, %v): got %v, want %v", tt.err, tt.target, got, tt.want)
			}
		})
	}
}

func TestListAsTellsKindsApart(t *testing.T) {
	err := fmt.Errorf("load: %w", &fielderr.List[kindA]{Errors: []fielderr.FieldError{{Path: "x", Reason: "bad"}}})
	if _, ok := errors.AsType[*fielderr.List[kindB]](err); ok {
		t.Errorf("errors.AsType[*List[kindB]]: got ok, want a *List[kindA] not to be found as one")
	}
	l, ok := errors.AsType[*fielderr.List[kindA]](err)
	if !ok {
		t.Fatalf("errors.AsType[*List[kindA]]: got %v, want ok", err)
	}
	if got, want := l.Paths(), []string{"x"}; !slices.Equal(got, want) {
		t.Errorf("Paths: got %q, want %q", got, want)
	}
}

func TestReportErr(t *testing.T) {
	var r fielderr.Report[kindA]
	if err := r.Err(); err != nil {
		t.Fatalf("empty report: got %v, want nil", err)
	}
	r.Add("limit", "must be above 0, got %d", -1)
	err := r.Err()
	if !errors.Is(err, errA) || errors.Is(err, errB) {
		t.Errorf("got %v, want an error matching errA only", err)
	}
	if got, want := err.Error(), "limit: must be above 0, got -1"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestReportCap(t *testing.T) {
	tests := []struct {
		name        string
		n           int // problems recorded
		omit        int // problems counted with Omit
		wantListed  int
		wantOmitted int
	}{
		{"under", fielderr.MaxErrors - 1, 0, fielderr.MaxErrors - 1, 0},
		{"at", fielderr.MaxErrors, 0, fielderr.MaxErrors, 0},
		{"over", fielderr.MaxErrors + 5, 0, fielderr.MaxErrors, 5},
		{"under, with some omitted by a nested document", 10, 3, 10, 3},
		{"over, with some omitted by a nested document", fielderr.MaxErrors + 5, 3, fielderr.MaxErrors, 8},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r fielderr.Report[kindA]
			for i := range tt.n {
				if i%2 == 0 {
					r.Add(fielderr.Index("rules", i), "bad")
				} else {
					r.Fail(fielderr.Index("rules", i), "bad")
				}
			}
			r.Omit(tt.omit)
			l, ok := errors.AsType[*fielderr.List[kindA]](r.Err())
			if !ok {
				t.Fatalf("got %v, want a *List", r.Err())
			}
			if len(l.Errors) != tt.wantListed || l.Omitted != tt.wantOmitted {
				t.Errorf("got %d listed and %d omitted, want %d and %d", len(l.Errors), l.Omitted, tt.wantListed, tt.wantOmitted)
			}
			if got, want := l.Errors[0].Path, "rules[0]"; got != want {
				t.Errorf("first path: got %q, want %q (the first problems found are kept)", got, want)
			}
		})
	}
}

func TestReportIsFailed(t *testing.T) {
	tests := []struct {
		name   string
		failed []string
		path   string
		want   bool
	}{
		{"nothing failed", nil, "rules", false},
		{"the path itself", []string{"rules"}, "rules", true},
		{"a field inside", []string{"rules[0]"}, "rules[0].limit", true},
		{"an element inside", []string{"rules"}, "rules[3]", true},
		{"deep inside", []string{"rules"}, "rules[3].overrides[1].match.user", true},
		{"a quoted key inside", []string{"conditions"}, `conditions["x.y"]`, true},
		{"inside a quoted key", []string{`conditions["x.y"]`}, `conditions["x.y"].z`, true},
		{"a name that only starts the same", []string{"rules"}, "rules_x", false},
		{"a longer name", []string{"rule"}, "rules[0]", false},
		{"a sibling", []string{"rules[1]"}, "rules[10]", false},
		{"the container of a failed field", []string{"rules[0].limit"}, "rules[0]", false},
		{"the whole document", []string{""}, "name", true},
		{"the whole document, itself", []string{""}, "", true},
		{"the document does not fail with a field", []string{"name"}, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r fielderr.Report[kindA]
			for _, p := range tt.failed {
				r.MarkFailed(p)
			}
			if got := r.IsFailed(tt.path); got != tt.want {
				t.Errorf("IsFailed(%q) after failing %q: got %v, want %v", tt.path, tt.failed, got, tt.want)
			}
		})
	}
}

func TestReportFailAndAdd(t *testing.T) {
	var r fielderr.Report[kindA]
	r.Fail("rules[0]", "want an object, got %s", "a string")
	r.Add("rules[0].limit", "required")      // dropped: inside a failed path
	r.Add("rules[0]", "duplicate")           // dropped: the failed path itself
	r.Fail("rules[0].limit", "not a number") // kept: Fail always records
	r.Add("rules[1].limit", "required")      // kept
	r.MarkFailed("domain")
	r.Add("domain", "required") // dropped: marked without a problem
	want := []string{"rules[0]: want an object, got a string", "rules[0].limit: not a number", "rules[1].limit: required"}
	if got := r.Err().Error(); got != strings.Join(want, "\n") {
		t.Errorf("got %q, want %q", got, strings.Join(want, "\n"))
	}
}

func TestReportSort(t *testing.T) {
	var r fielderr.Report[kindA]
	for _, p := range []string{"b", "a", "c", "b", "a"} {
		r.Add(p, "%s%d", p, r.Len())
	}
	r.Sort(2, func(a, b fielderr.FieldError) int { return strings.Compare(a.Path, b.Path) })
	l, _ := errors.AsType[*fielderr.List[kindA]](r.Err())
	var got []string
	for _, fe := range l.Errors {
		got = append(got, fe.Reason)
	}
	// The first two stay put; the rest sort by path, stably.
	if want := []string{"b0", "a1", "a4", "b3", "c2"}; !slices.Equal(got, want) {
		t.Errorf("got %q, want %q", got, want)
	}
}

func TestPaths(t *testing.T) {
	tests := []struct {
		name string
		got  string
		want string
	}{
		{"field at the top", fielderr.Field("", "rules"), "rules"},
		{"field", fielderr.Field("rules[0]", "limit"), "rules[0].limit"},
		{"index", fielderr.Index("rules", 3), "rules[3]"},
		{"index at the top", fielderr.Index("", 0), "[0]"},
		{"plain key", fielderr.Key("match", "user_id-2"), "match.user_id-2"},
		{"plain key at the top", fielderr.Key("", "user"), "user"},
		{"key with a dot", fielderr.Key("conditions", "x.y"), `conditions["x.y"]`},
		{"key with a bracket", fielderr.Key("m", "a[0]"), `m["a[0]"]`},
		{"key with a space", fielderr.Key("m", "a b"), `m["a b"]`},
		{"key with a quote", fielderr.Key("m", `a"b`), `m["a\"b"]`},
		{"non-ASCII key", fielderr.Key("m", "é"), `m["é"]`},
		{"empty key", fielderr.Key("m", ""), `m[""]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.got != tt.want {
				t.Errorf("got %q, want %q", tt.got, tt.want)
			}
		})
	}
}

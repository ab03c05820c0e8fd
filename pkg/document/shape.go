package document

import (
	"reflect"
	"strings"
)

// Shape is where the objects of a JSON document decoded into a Go type
// with encoding/json have struct fields, and their exact names. That
// decoder matches a key to a struct field case-insensitively — "HITS"
// sets the field tagged "hits", and {"hits":1,"HITS":500} keeps 500 — so
// that a proxy or a WAF that reads the same body with exact names would
// disagree with it about the request. ScanKeys finds such keys with a
// Shape. A nil *Shape has no struct fields anywhere: every key is free.
type Shape struct {
	fields map[string]*Shape // a struct's JSON names → their values' shapes
	elem   *Shape            // a list's items, a map's values
}

// ShapeOf returns the shape of t as encoding/json decodes into it: a
// struct's fields by their JSON names (the tag's name, or the field's;
// untagged embedded structs promote their fields; "-" and unexported
// fields are not decoded), the items of slices and arrays, the values of
// maps, what pointers point to. Recursive types are followed once.
func ShapeOf(t reflect.Type) *Shape {
	return shapeOf(t, map[reflect.Type]*Shape{})
}

func shapeOf(t reflect.Type, seen map[reflect.Type]*Shape) *Shape {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if s, ok := seen[t]; ok {
		return s
	}
	switch t.Kind() {
	case reflect.Slice, reflect.Array, reflect.Map:
		s := &Shape{}
		seen[t] = s
		s.elem = shapeOf(t.Elem(), seen)
		if s.elem == nil {
			seen[t] = nil
			return nil
		}
		return s
	case reflect.Struct:
		s := &Shape{fields: map[string]*Shape{}}
		seen[t] = s
		addFields(s, t, seen)
		return s
	}
	return nil
}

// addFields adds t's JSON fields to s; a name s has already (from an
// outer struct) keeps its shape, as encoding/json's outer field wins.
func addFields(s *Shape, t reflect.Type, seen map[reflect.Type]*Shape) {
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" && f.Tag.Get("json") == "-" {
			continue
		}
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if f.Anonymous && name == "" && ft.Kind() == reflect.Struct {
			addFields(s, ft, seen)
			continue
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		if _, ok := s.fields[name]; !ok {
			s.fields[name] = shapeOf(f.Type, seen)
		}
	}
}

// fold returns the field name of s that k matches case-insensitively
// only, as encoding/json would match it (the first in byte order when
// several do), or "" when none does.
func (s *Shape) fold(k []byte) string {
	match := ""
	for name := range s.fields {
		if strings.EqualFold(name, string(k)) && (match == "" || name < match) {
			match = name
		}
	}
	return match
}

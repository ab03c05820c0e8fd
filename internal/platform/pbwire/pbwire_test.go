package pbwire

import (
	"bytes"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
)

func TestEach(t *testing.T) {
	tag := protowire.AppendTag
	var msg []byte
	msg = protowire.AppendVarint(tag(msg, 1, protowire.VarintType), 300)
	msg = protowire.AppendString(tag(msg, 2, protowire.BytesType), "abc")
	msg = protowire.AppendFixed32(tag(msg, 3, protowire.Fixed32Type), 7)
	msg = protowire.AppendFixed64(tag(msg, 4, protowire.Fixed64Type), 7)
	msg = tag(protowire.AppendVarint(tag(tag(msg, 5, protowire.StartGroupType), 1, protowire.VarintType), 9), 5, protowire.EndGroupType)
	msg = protowire.AppendString(tag(msg, 6, protowire.BytesType), "")

	var got []Field
	stopped, err := Each(msg, func(f Field) bool { got = append(got, f); return true })
	if stopped || err != nil {
		t.Fatalf("got stopped=%v err=%v", stopped, err)
	}
	want := []struct {
		num   protowire.Number
		typ   protowire.Type
		bytes string
		v     uint64
	}{
		{1, protowire.VarintType, "", 300},
		{2, protowire.BytesType, "abc", 0},
		{3, protowire.Fixed32Type, "", 0},
		{4, protowire.Fixed64Type, "", 0},
		{5, protowire.StartGroupType, "", 0},
		{6, protowire.BytesType, "", 0},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d fields, want %d: %+v", len(got), len(want), got)
	}
	for i, w := range want {
		g := got[i]
		if g.Num != w.num || g.Type != w.typ || string(g.Bytes) != w.bytes || g.Varint != w.v {
			t.Errorf("field %d: got %+v, want %+v", i, g, w)
		}
		if g.Type == protowire.BytesType && !bytes.Equal(msg[g.Off:g.Off+len(g.Bytes)], g.Bytes) {
			t.Errorf("field %d: offset %d does not hold its bytes", i, g.Off)
		}
	}

	stopped, err = Each(msg, func(f Field) bool { return f.Num < 2 })
	if !stopped || err != nil {
		t.Errorf("fn refusing field 2: got stopped=%v err=%v, want stopped", stopped, err)
	}
}

// Framing proto.Unmarshal refuses is an error, after the fields before it.
func TestEachBadFraming(t *testing.T) {
	tag := protowire.AppendTag
	good := protowire.AppendVarint(tag(nil, 1, protowire.VarintType), 1)
	for name, bad := range map[string][]byte{
		"truncated tag":           {0x80},
		"field number 0":          {0x00},
		"field number past max":   []byte("\xf0\xf0\xf0\xf00"),
		"length past the end":     append(tag(nil, 2, protowire.BytesType), 5, 'a'),
		"truncated varint":        append(tag(nil, 1, protowire.VarintType), 0x80),
		"truncated fixed64":       append(tag(nil, 1, protowire.Fixed64Type), 1, 2),
		"group left open":         tag(nil, 3, protowire.StartGroupType),
		"end group without start": tag(nil, 3, protowire.EndGroupType),
		"reserved wire type":      protowire.AppendVarint(nil, 1<<3|6),
	} {
		n := 0
		_, err := Each(append(append([]byte(nil), good...), bad...), func(Field) bool { n++; return true })
		if err == nil {
			t.Errorf("%s: no error", name)
		}
		if n != 1 {
			t.Errorf("%s: %d fields handed over before the error, want 1", name, n)
		}
	}
}

// TestFieldIn: a field's value cut from the message as a string is the
// field's bytes, for each field of a message of several.
func TestFieldIn(t *testing.T) {
	var msg []byte
	msg = protowire.AppendTag(msg, 1, protowire.BytesType)
	msg = protowire.AppendString(msg, "key")
	msg = protowire.AppendTag(msg, 2, protowire.VarintType)
	msg = protowire.AppendVarint(msg, 300)
	msg = protowire.AppendTag(msg, 3, protowire.BytesType)
	msg = protowire.AppendString(msg, "a value")
	s := string(msg)
	var got []string
	if _, err := Each(msg, func(f Field) bool {
		if f.Type == protowire.BytesType {
			got = append(got, f.In(s))
		}
		return true
	}); err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0] != "key" || got[1] != "a value" {
		t.Errorf("got %q, want [key \"a value\"]", got)
	}
}

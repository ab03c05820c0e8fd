package adminapi_test

import (
	"encoding/json"
	"testing"

	"github.com/weirhq/weir/pkg/adminapi"
)

func TestAuditRecordID(t *testing.T) {
	tests := []struct{ name, doc, want string }{
		{"string", `{"id": "0001"}`, "0001"},
		{"number", `{"id": 42}`, "42"},
		{"absent", `{}`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var r adminapi.AuditRecord
			if err := json.Unmarshal([]byte(tt.doc), &r); err != nil || r.ID != tt.want {
				t.Errorf("got %q, %v; want %q", r.ID, err, tt.want)
			}
		})
	}
	var r adminapi.AuditRecord
	if err := json.Unmarshal([]byte(`{"id": true}`), &r); err == nil {
		t.Errorf("id true: got no error, want one")
	}
}

package document_test

import (
	"testing"

	"github.com/weirhq/weir/pkg/document"
)

// checkBody is a typical body of the check API, the hot path that reads
// JSON with duplicate detection.
var checkBody = []byte(`{"domain": "shop",
 "attributes": {"ip": "203.0.113.7", "username": "john", "path": "/auth/login", "method": "POST"},
 "hits": 1}`)

func BenchmarkParseJSONDuplicates(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		tree, err := document.ParseJSON(checkBody, document.Limits{})
		if err != nil {
			b.Fatal(err)
		}
		if d := tree.Duplicates(""); len(d) > 0 {
			b.Fatalf("got duplicates %q, want none", d)
		}
	}
}

func BenchmarkRepeatedKeys(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		d, err := document.RepeatedKeys(checkBody, document.Limits{})
		if err != nil {
			b.Fatal(err)
		}
		if len(d) > 0 {
			b.Fatalf("got duplicates %q, want none", d)
		}
	}
}

package topk_test

import (
	"fmt"

	"github.com/weirhq/weir/internal/dc/usage/topk"
)

func Example() {
	s, err := topk.New(2)
	if err != nil {
		panic(err)
	}
	for _, k := range []string{"alice", "bob", "alice", "carol", "alice"} {
		s.Add(k, 1)
	}
	// carol took bob's counter, inheriting his count of 1 as her error.
	for _, e := range s.Top(nil) {
		fmt.Printf("%s: %d (at least %d)\n", e.Key, e.Count, e.Guaranteed())
	}
	// Output:
	// alice: 3 (at least 3)
	// carol: 2 (at least 1)
}

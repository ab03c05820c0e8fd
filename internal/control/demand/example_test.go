package demand_test

import (
	"fmt"

	"github.com/weirhq/weir/internal/control/demand"
)

func Example() {
	e, err := demand.New(demand.Config{}) // the defaults
	if err != nil {
		fmt.Println(err)
		return
	}
	var s demand.State // one DC's demand for one rule, as a fraction of its limit
	show := func(iv int64, changed bool) {
		fmt.Printf("interval %d: estimate %.3f changed %v\n", iv, s.Estimate(), changed)
	}

	// Steady demand around 40% of the limit, ±2%: the estimate settles and
	// then stays put.
	changes := 0
	for iv := range int64(40) {
		offered := 0.40 + 0.008*float64(iv%3-1)
		if e.Observe(&s, iv, offered) && iv >= 20 {
			changes++
		}
	}
	fmt.Printf("after 40 intervals: estimate %.3f, %d changes in the last 20\n", s.Estimate(), changes)

	// Demand doubles: published on the second interval at the new level.
	for iv := int64(40); iv < 43; iv++ {
		show(iv, e.Observe(&s, iv, 0.80))
	}

	// The DC stops reporting: its estimate decays, halving every 3 intervals.
	for iv := int64(43); iv < 49; iv += 3 {
		show(iv+2, e.Advance(&s, iv+2))
	}
	// Output:
	// after 40 intervals: estimate 0.400, 0 changes in the last 20
	// interval 40: estimate 0.400 changed false
	// interval 41: estimate 0.800 changed true
	// interval 42: estimate 0.800 changed false
	// interval 45: estimate 0.400 changed true
	// interval 48: estimate 0.200 changed true
}

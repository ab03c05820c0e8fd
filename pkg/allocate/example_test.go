package allocate_test

import (
	"fmt"

	"github.com/weirhq/weir/pkg/allocate"
)

func ExampleAllocate() {
	// A global limit of 1,000 requests per second. Demand (as fractions of
	// it) exceeds the limit: us-east is held to the water level, eu-west
	// gets all it asks for, ap-south is guaranteed its floor.
	dcs := []allocate.DC{
		{Name: "us-east", Demand: 0.9},
		{Name: "eu-west", Demand: 0.25},
		{Name: "ap-south", Demand: 0.05, Floor: 0.1},
	}
	shares := make([]float64, len(dcs))
	res := allocate.Allocate(dcs, shares)
	for i, d := range dcs {
		fmt.Printf("%-8s share %.2f local limit %4.0f/s\n", d.Name, shares[i], shares[i]*1000)
	}
	fmt.Printf("level %.2f congested %v\n", res.Level, res.Congested)

	// Demand falls below the limit: everyone gets their demand, and the
	// headroom (0.25) goes out 0.04 in equal parts, the rest in proportion
	// to demand.
	dcs[0].Demand = 0.4
	res = allocate.Allocate(dcs, shares)
	fmt.Printf("shares %.3f headroom %.2f\n", shares, res.Headroom)
	// Output:
	// us-east  share 0.65 local limit  650/s
	// eu-west  share 0.25 local limit  250/s
	// ap-south share 0.10 local limit  100/s
	// level 0.65 congested true
	// shares [0.533 0.338 0.128] headroom 0.25
}

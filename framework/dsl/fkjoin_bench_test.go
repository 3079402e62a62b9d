package dsl_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/causeway-stream/causeway/framework"
	"github.com/causeway-stream/causeway/framework/driver"
	"github.com/causeway-stream/causeway/framework/dsl"
)

// BenchmarkTableJoinUpdates measures a left-row update through a table
// join, on the driver with 3 partitions and 1,000 right rows, each result
// written out: "key" joins on the left row's own key (one processor),
// "foreign-key" on a key taken from its value (a subscription and an
// answer through two internal topics and a second processor). Their
// ratio is what the round trip costs.
func BenchmarkTableJoinUpdates(b *testing.B) {
	const customers = 1000
	for _, kind := range []string{"key", "foreign-key"} {
		b.Run(kind, func(b *testing.B) {
			bld := dsl.NewBuilder("bench")
			left := dsl.TableFrom(bld, "orders", "orders", text)
			right := dsl.TableFrom(bld, "customers", "customers", text)
			joiner := func(_ string, v, c string) (string, error) { return v + "@" + c, nil }
			if kind == "key" {
				dsl.JoinTables(left, right, joiner).ToStream().To("out")
			} else {
				dsl.JoinForeignKey(left, right, "joined", func(_ string, v string) (string, bool, error) {
					c, _, ok := strings.Cut(v, "|")
					return c, ok, nil
				}, joiner).ToStream().To("out")
			}
			topo, err := bld.Build()
			if err != nil {
				b.Fatal(err)
			}
			d, err := driver.New(topo, driver.DefaultPartitions(3))
			if err != nil {
				b.Fatal(err)
			}
			for i := range customers {
				if _, _, err := d.Pipe("customers", framework.Record{Key: fmt.Appendf(nil, "c-%d", i), Value: []byte("north")}); err != nil {
					b.Fatal(err)
				}
			}
			if err := d.Run(); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				c := i % customers
				key := fmt.Appendf(nil, "o-%d", i%10000)
				if kind == "key" {
					key = fmt.Appendf(nil, "c-%d", c)
				}
				if _, _, err := d.Pipe("orders", framework.Record{Key: key, Value: fmt.Appendf(nil, "c-%d|item %d", c, i)}); err != nil {
					b.Fatal(err)
				}
				if i%100 == 99 {
					if err := d.Run(); err != nil {
						b.Fatal(err)
					}
				}
			}
			if err := d.Run(); err != nil {
				b.Fatal(err)
			}
		})
	}
}

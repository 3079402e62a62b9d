package dsl_test

import (
	"fmt"
	"testing"

	"github.com/causeway-stream/causeway/framework"
	"github.com/causeway-stream/causeway/framework/driver"
	"github.com/causeway-stream/causeway/framework/dsl"
)

// BenchmarkCountUpdates measures a record through a count of its key on
// the driver (in-memory stores, one partition, 10,000 keys), each result
// written out: the count's read and write, and the write of its latest
// time beside it.
func BenchmarkCountUpdates(b *testing.B) {
	bld := dsl.NewBuilder("bench")
	dsl.From(bld, "words", text).GroupByKey().Count("counts").ToStream().To("out")
	topo, err := bld.Build()
	if err != nil {
		b.Fatal(err)
	}
	d, err := driver.New(topo)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		if _, _, err := d.Pipe("words", framework.Record{Key: fmt.Appendf(nil, "w-%d", i%10000), Value: []byte("x")}); err != nil {
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
}

package owned

// counter is a part that owns its state.
//
//causeway:owned
type counter struct {
	n     int
	seen  map[string]bool
	inner struct{ last string }
	list  []int
}

// free is not marked: anyone may write it.
type free struct{ n int }

func newCounter() *counter {
	c := &counter{seen: map[string]bool{}}
	c.n = 1 // a constructor may
	return c
}

func (c *counter) add(k string) {
	c.n++
	c.seen[k] = true
	c.inner.last = k
	c.list = append(c.list, len(k))
	func() { c.n-- }() // a closure in a method is the method's
	delete(c.seen, "x")
}

// other is another part of the package.
type other struct {
	c *counter
	f free
}

func (o *other) meddle() {
	o.c.n = 2               // want `counter.n is written outside the methods of counter`
	o.c.n++                 // want `counter.n is written outside the methods of counter`
	o.c.seen["k"] = true    // want `counter.seen is written outside the methods of counter`
	o.c.inner.last = "k"    // want `counter.inner is written outside the methods of counter`
	o.c.list[0] = 1         // want `counter.list is written outside the methods of counter`
	delete(o.c.seen, "k")   // want `counter.seen is written outside the methods of counter`
	clear(o.c.seen)         // want `counter.seen is written outside the methods of counter`
	func() { o.c.n += 3 }() // want `counter.n is written outside the methods of counter`
	o.f.n = 1               // not owned
	o.c.add("k")            // a call of its method is no write
	n := o.c.n              // reading is no write
	_ = n
}

// makeCounter is a constructor by its result, whatever its name.
func makeCounter() (*counter, error) {
	c := &counter{}
	c.n = 2
	return c, nil
}

func reset(c *counter) {
	*c = counter{} // replacing the whole value is left to the type's users
	c.n = 0        // want `counter.n is written outside the methods of counter`
}

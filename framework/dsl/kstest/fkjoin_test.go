package kstest

import (
	"cmp"
	"encoding/binary"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/causeway-stream/causeway/framework/driver"
	"github.com/causeway-stream/causeway/framework/dsl"
)

// The foreign-key join cases come from Kafka Streams'
// KTableKTableForeignKeyJoinIntegrationTest (a TopologyTestDriver test,
// despite its name) and KTableKTableForeignKeyJoinScenarioTest. Their
// parameters map as follows: leftJoin and rejoin are kept; the result is
// always materialized here (every DSL table is), so materialized=false
// is the same case; optimization, withHeaders and the serde-placement
// variants of the scenario test have no counterpart (there is one way to
// give serdes, and no optimizer). Each case runs on one partition per
// topic and on three, where the subscription and the answer of most rows
// cross partitions.

// fkStep is one stage of a Java test: its inputs, then what it asserts
// with readKeyValuesToMap (the last value of each key since the stage
// before; nil values are tombstones) and asMap(store).
type fkStep struct {
	in    []in
	out   map[string]string
	store map[string]string
	// rejoin is what the rejoin topic got in the stage, when the case has
	// one and the Java test asserts it; rejoinHas is what it must contain.
	rejoin, rejoinHas map[string]string
	// storeName names the store asserted, "store" when empty; a named
	// store is asserted only where store is set.
	storeName string
	// check asserts what else the stage leaves.
	check func(t *testing.T, d *driver.Driver)
}

// fkTopology is KTableKTableForeignKeyJoinIntegrationTest.getTopology:
// left_table joined on the foreign key its value names after "|" with
// right_table, into "out", and, with rejoin, the result joined back with
// left_table into "rejoin-out". A versioned side keeps five minutes of
// history.
type fkTopology struct {
	leftJoin, rejoin, leftVersioned, rightVersioned bool
	// extractor replaces the default foreign-key extractor.
	extractor func(v string) (string, bool)
}

func (c fkTopology) String() string {
	return fmt.Sprintf("leftJoin=%v,rejoin=%v,leftVersioned=%v,rightVersioned=%v", c.leftJoin, c.rejoin, c.leftVersioned, c.rightVersioned)
}

func fkExtract(v string) (string, bool) {
	tokens := strings.Split(v, "|")
	if len(tokens) != 2 {
		return "", false
	}
	return tokens[1], true
}

func (c fkTopology) build(b *dsl.Builder) {
	var lopts, ropts []dsl.StoreOpt
	if c.leftVersioned {
		lopts = append(lopts, dsl.Versioned(5*time.Minute))
	}
	if c.rightVersioned {
		ropts = append(ropts, dsl.Versioned(5*time.Minute))
	}
	left := dsl.TableFrom(b, "left_table", "left", text, lopts...)
	right := dsl.TableFrom(b, "right_table", "right", text, ropts...)
	extract := c.extractor
	if extract == nil {
		extract = fkExtract
	}
	fk := func(_ string, v string) (string, bool, error) {
		k, ok := extract(v)
		return k, ok, nil
	}
	joiner := func(_, l, r string, found bool) (string, error) { return pair("", l, r, found), nil }
	rejoiner := func(_, l string, _ bool, r string, rok bool) (string, error) { return pair("rejoin", l, r, rok), nil }
	var result dsl.Table[string, string]
	if c.leftJoin {
		result = dsl.LeftJoinForeignKey(left, right, "store", fk, joiner)
		if c.rejoin {
			dsl.LeftJoinTables(result, left, func(k, l, r string, rok bool) (string, error) { return rejoiner(k, l, true, r, rok) }).
				ToStream().To("rejoin-out")
		}
	} else {
		result = dsl.JoinForeignKey(left, right, "store", fk, func(k, l, r string) (string, error) { return joiner(k, l, r, true) })
		if c.rejoin {
			dsl.JoinTables(result, left, func(k, l, r string) (string, error) { return rejoiner(k, l, true, r, true) }).
				ToStream().To("rejoin-out")
		}
	}
	result.ToStream().To("out")
}

// fkCases are the parameters a Java method runs with: leftJoin and rejoin
// both ways, and the versioned sides both ways without rejoin (Kafka
// Streams' data() and versionedData(), less what has no counterpart).
func fkCases(leftJoins ...bool) []fkTopology {
	var out []fkTopology
	for _, lj := range leftJoins {
		for _, rejoin := range []bool{false, true} {
			out = append(out, fkTopology{leftJoin: lj, rejoin: rejoin})
		}
		for _, lv := range []bool{false, true} {
			for _, rv := range []bool{false, true} {
				if lv || rv {
					out = append(out, fkTopology{leftJoin: lj, leftVersioned: lv, rightVersioned: rv})
				}
			}
		}
	}
	return out
}

// runFK runs steps against each topology, on one partition and on three.
func runFK(t *testing.T, from string, cases []fkTopology, steps func(c fkTopology) []fkStep) {
	for _, c := range cases {
		runSteps(t, fmt.Sprintf("%s/%v", from, c), c.build, c.rejoin, steps(c))
	}
}

// runSteps runs the stages of one case on a topology build makes, on one
// partition per topic and on three; rejoin says whether it writes
// "rejoin-out" too.
func runSteps(t *testing.T, name string, build func(b *dsl.Builder), rejoin bool, steps []fkStep) {
	for _, parts := range []int32{1, 3} {
		t.Run(fmt.Sprintf("%s/partitions=%d", name, parts), func(t *testing.T) {
			b := dsl.NewBuilder("kstest")
			build(b)
			topo, err := b.Build()
			require.NoError(t, err)
			d, err := driver.New(topo, driver.DefaultPartitions(parts))
			require.NoError(t, err)
			seen := map[string]int64{}
			for i, st := range steps {
				for _, r := range st.in {
					pipeOne(t, d, r)
				}
				assert.Equal(t, orEmpty(st.out), sinceLast(t, d, "out", seen), "%s: stage %d, out", name, i)
				if st.store != nil || st.storeName == "" {
					assert.Equal(t, orEmpty(st.store), storeRows(t, d, cmp.Or(st.storeName, "store")), "%s: stage %d, store", name, i)
				}
				if rejoin {
					got := sinceLast(t, d, "rejoin-out", seen)
					if st.rejoin != nil {
						assert.Equal(t, st.rejoin, got, "%s: stage %d, rejoin-out", name, i)
					}
					for k, v := range st.rejoinHas {
						assert.Contains(t, got, k, "%s: stage %d, rejoin-out", name, i)
						assert.Equal(t, v, got[k], "%s: stage %d, rejoin-out", name, i)
					}
				}
				if st.check != nil {
					st.check(t, d)
				}
			}
			assert.Empty(t, d.Failed())
		})
	}
}

func orEmpty(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

// sinceLast is readKeyValuesToMap: the last value of each key written to
// topic since the last call for it (seen holds, per partition, the next
// offset not yet read).
func sinceLast(t *testing.T, d *driver.Driver, topic string, seen map[string]int64) map[string]string {
	t.Helper()
	recs, err := d.Records(topic)
	if err != nil {
		return map[string]string{}
	}
	out := map[string]string{}
	// A key lives in one partition, where its records are in order.
	for _, r := range recs {
		at := fmt.Sprint(topic, "/", r.Partition)
		if r.Offset < seen[at] {
			continue
		}
		seen[at] = r.Offset + 1
		v := null
		if r.Value != nil {
			v = string(r.Value)
		}
		out[string(r.Key)] = v
	}
	return out
}

// storeRows is asMap(store): every row of the named store, over all
// tasks.
func storeRows(t *testing.T, d *driver.Driver, name string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, st := range d.Tasks() {
		kv, err := d.Store(st.ID, name)
		if err != nil {
			continue // a task of another processor
		}
		for k, v := range kv.Range(nil, nil) {
			out[string(k)] = string(v)
		}
	}
	return out
}

// pair is the Java tests' joiners: "(value1,value2)", with "null" for a
// missing right side, after a prefix.
func pair(prefix, l, r string, rok bool) string {
	if !rok {
		r = "null"
	}
	return prefix + "(" + l + "," + r + ")"
}

const null1 = "(lhsValue1|rhs1,null)"

func TestForeignKeyJoinFromLeftThenDeleteLeftEntity(t *testing.T) {
	runFK(t, "KTableKTableForeignKeyJoinIntegrationTest.doJoinFromLeftThenDeleteLeftEntity", fkCases(true, false), func(c fkTopology) []fkStep {
		two := map[string]string{"lhs1": "(lhsValue1|rhs1,rhsValue1)", "lhs2": "(lhsValue2|rhs2,rhsValue2)"}
		three := maps.Clone(two)
		three["lhs3"] = "(lhsValue3|rhs1,rhsValue1)"
		after := maps.Clone(three)
		delete(after, "lhs1")
		return []fkStep{
			{in: []in{{"right_table", "rhs1", "rhsValue1", 0}, {"right_table", "rhs2", "rhsValue2", 1}, {"right_table", "rhs3", "rhsValue3", 2}}, rejoin: map[string]string{}},
			{
				in:  []in{{"left_table", "lhs1", "lhsValue1|rhs1", 3}, {"left_table", "lhs2", "lhsValue2|rhs2", 4}},
				out: two, store: two,
				rejoin: map[string]string{"lhs1": "rejoin((lhsValue1|rhs1,rhsValue1),lhsValue1|rhs1)", "lhs2": "rejoin((lhsValue2|rhs2,rhsValue2),lhsValue2|rhs2)"},
			},
			{
				in:     []in{{"left_table", "lhs3", "lhsValue3|rhs1", 5}},
				out:    map[string]string{"lhs3": "(lhsValue3|rhs1,rhsValue1)"},
				store:  three,
				rejoin: map[string]string{"lhs3": "rejoin((lhsValue3|rhs1,rhsValue1),lhsValue3|rhs1)"},
			},
			{in: []in{{"left_table", "lhs1", null, 6}}, out: map[string]string{"lhs1": null}, store: after, rejoinHas: map[string]string{"lhs1": null}},
		}
	})
}

func TestForeignKeyJoinFromLeftThenUpdateFkThenRevertBack(t *testing.T) {
	runFK(t, "KTableKTableForeignKeyJoinIntegrationTest.doJoinFromLeftThenUpdateFkThenRevertBack", fkCases(true, false), func(fkTopology) []fkStep {
		one := map[string]string{"lhs1": "(lhsValue1|rhs1,rhsValue1)"}
		two := map[string]string{"lhs1": "(lhsValue1|rhs2,rhsValue2)"}
		return []fkStep{
			{in: []in{{"right_table", "rhs1", "rhsValue1", 0}, {"right_table", "rhs2", "rhsValue2", 1}}},
			{in: []in{{"left_table", "lhs1", "lhsValue1|rhs1", 3}}, out: one, store: one},
			{in: []in{{"left_table", "lhs1", "lhsValue1|rhs2", 5}}, out: two, store: two},
			{in: []in{{"left_table", "lhs1", "lhsValue1|rhs1", 6}}, out: one, store: one},
		}
	})
}

func TestForeignKeyJoinFromRightThenDeleteRightEntity(t *testing.T) {
	runFK(t, "KTableKTableForeignKeyJoinIntegrationTest.doJoinFromRightThenDeleteRightEntity", fkCases(true, false), func(c fkTopology) []fkStep {
		lefts := []in{{"left_table", "lhs1", "lhsValue1|rhs1", 0}, {"left_table", "lhs2", "lhsValue2|rhs2", 1}, {"left_table", "lhs3", "lhsValue3|rhs1", 2}}
		var halves map[string]string
		if c.leftJoin {
			halves = map[string]string{"lhs1": null1, "lhs2": "(lhsValue2|rhs2,null)", "lhs3": "(lhsValue3|rhs1,null)"}
		}
		rhs1 := map[string]string{"lhs1": "(lhsValue1|rhs1,rhsValue1)", "lhs3": "(lhsValue3|rhs1,rhsValue1)"}
		stored1 := maps.Clone(rhs1)
		if c.leftJoin {
			stored1["lhs2"] = "(lhsValue2|rhs2,null)"
		}
		all := maps.Clone(rhs1)
		all["lhs2"] = "(lhsValue2|rhs2,rhsValue2)"
		deleted := map[string]string{"lhs1": null, "lhs3": null}
		storedAfter := map[string]string{"lhs2": "(lhsValue2|rhs2,rhsValue2)"}
		if c.leftJoin {
			deleted = map[string]string{"lhs1": null1, "lhs3": "(lhsValue3|rhs1,null)"}
			storedAfter["lhs1"], storedAfter["lhs3"] = null1, "(lhsValue3|rhs1,null)"
		}
		return []fkStep{
			{in: lefts, out: halves, store: halves},
			{in: []in{{"right_table", "rhs1", "rhsValue1", 3}}, out: rhs1, store: stored1},
			{in: []in{{"right_table", "rhs2", "rhsValue2", 4}}, out: map[string]string{"lhs2": "(lhsValue2|rhs2,rhsValue2)"}, store: all},
			{in: []in{{"right_table", "rhs3", "rhsValue3", 5}}, store: all},
			{in: []in{{"right_table", "rhs1", null, 6}}, out: deleted, store: storedAfter},
		}
	})
}

func TestForeignKeyJoinEmitsTombstoneWhenDeletingNonJoiningRecords(t *testing.T) {
	runFK(t, "KTableKTableForeignKeyJoinIntegrationTest.shouldEmitTombstoneWhenDeletingNonJoiningRecords", fkCases(true, false), func(c fkTopology) []fkStep {
		var first map[string]string
		if c.leftJoin {
			first = map[string]string{"lhs1": null1}
		}
		return []fkStep{
			{in: []in{{"left_table", "lhs1", "lhsValue1|rhs1", 0}}, out: first, store: first},
			// An inner join cannot know whether a result was emitted, so it
			// sends the tombstone anyway; a left join had one.
			{in: []in{{"left_table", "lhs1", null, 1}}, out: map[string]string{"lhs1": null}},
			// Deleting what is not there is idempotent.
			{in: []in{{"left_table", "lhs1", null, 2}}},
		}
	})
}

func TestForeignKeyJoinEmitsNoTombstonesWhenDeletingNonExistingRecords(t *testing.T) {
	runFK(t, "KTableKTableForeignKeyJoinIntegrationTest.shouldNotEmitTombstonesWhenDeletingNonExistingRecords", fkCases(true, false), func(fkTopology) []fkStep {
		return []fkStep{{in: []in{{"left_table", "lhs1", null, 0}}}}
	})
}

func TestForeignKeyJoinProducesNullsWhenValueHasNonMatchingForeignKey(t *testing.T) {
	runFK(t, "KTableKTableForeignKeyJoinIntegrationTest.joinShouldProduceNullsWhenValueHasNonMatchingForeignKey", fkCases(true, false), func(c fkTopology) []fkStep {
		half := func(fk string) map[string]string {
			if !c.leftJoin {
				return nil
			}
			return map[string]string{"lhs1": "(lhsValue1|" + fk + ",null)"}
		}
		moved := func(fk string) map[string]string {
			if !c.leftJoin {
				return map[string]string{"lhs1": null}
			}
			return half(fk)
		}
		joined := map[string]string{"lhs1": "(lhsValue1|rhs1,rhsValue1)"}
		return []fkStep{
			{in: []in{{"left_table", "lhs1", "lhsValue1|rhs1", 0}}, out: half("rhs1"), store: half("rhs1")},
			{in: []in{{"left_table", "lhs1", "lhsValue1|rhs2", 1}}, out: moved("rhs2"), store: half("rhs2")},
			{in: []in{{"left_table", "lhs1", "lhsValue1|rhs3", 2}}, out: moved("rhs3"), store: half("rhs3")},
			// rhs1 is no longer referenced: nothing changes.
			{in: []in{{"right_table", "rhs1", "rhsValue1", 3}}, store: half("rhs3")},
			{in: []in{{"left_table", "lhs1", "lhsValue1|rhs1", 4}}, out: joined, store: joined},
			{in: []in{{"left_table", "lhs1", "lhsValue1|rhs2", 5}}, out: moved("rhs2"), store: half("rhs2")},
		}
	})
}

func TestForeignKeyJoinUnsubscribesOldForeignKeyIfLeftSideIsUpdated(t *testing.T) {
	runFK(t, "KTableKTableForeignKeyJoinIntegrationTest.shouldUnsubscribeOldForeignKeyIfLeftSideIsUpdated", fkCases(true, false), func(fkTopology) []fkStep {
		one := map[string]string{"lhs1": "(lhsValue1|rhs1,rhsValue1)"}
		two := map[string]string{"lhs1": "(lhsValue1|rhs2,rhsValue2)"}
		return []fkStep{
			{in: []in{{"right_table", "rhs1", "rhsValue1", 0}, {"right_table", "rhs2", "rhsValue2", 1}}},
			{in: []in{{"left_table", "lhs1", "lhsValue1|rhs1", 2}}, out: one, store: one},
			{in: []in{{"left_table", "lhs1", "lhsValue1|rhs2", 3}}, out: two, store: two},
			// The old foreign key's update reaches nobody.
			{in: []in{{"right_table", "rhs1", "rhsValue1Delta", 4}}, store: two},
		}
	})
}

func TestForeignKeyJoinEmitsRecordOnNullForeignKeyForLeftJoins(t *testing.T) {
	cases := fkCases(true)
	for i := range cases {
		cases[i].extractor = func(string) (string, bool) { return "", false }
	}
	runFK(t, "KTableKTableForeignKeyJoinIntegrationTest.shouldEmitRecordOnNullForeignKeyForLeftJoins", cases, func(fkTopology) []fkStep {
		one := map[string]string{"lhs1": null1}
		return []fkStep{{in: []in{{"left_table", "lhs1", "lhsValue1|rhs1", 0}}, out: one, store: one}}
	})
}

// subscribed reports whether the subscription store holds lhs subscribed
// to rhs, the key laid out as the Java test's subscriptionStoreKey.
func subscribed(t *testing.T, d *driver.Driver, lhs, rhs string) bool {
	t.Helper()
	key := binary.BigEndian.AppendUint32(nil, uint32(len(rhs)))
	key = append(append(key, rhs...), lhs...)
	for _, st := range d.Tasks() {
		kv, err := d.Store(st.ID, "store-subscription-store")
		if err != nil {
			continue
		}
		_, ok, err := kv.Get(key)
		require.NoError(t, err)
		if ok {
			return true
		}
	}
	return false
}

func TestForeignKeyJoinEmitsRecordWhenOldAndNewFkDiffer(t *testing.T) {
	cases := fkCases(true)
	for i := range cases {
		cases[i].extractor = func(v string) (string, bool) {
			fk := strings.Split(v, "|")[1]
			return fk, fk != "returnNull"
		}
	}
	runFK(t, "KTableKTableForeignKeyJoinIntegrationTest.shouldEmitRecordWhenOldAndNewFkDiffer", cases, func(fkTopology) []fkStep {
		one := map[string]string{"lhs1": null1}
		two := map[string]string{"lhs1": "(lhsValue1|returnNull,null)"}
		return []fkStep{
			{in: []in{{"left_table", "lhs1", "lhsValue1|rhs1", 0}}, out: one, store: one,
				check: func(t *testing.T, d *driver.Driver) { assert.True(t, subscribed(t, d, "lhs1", "rhs1")) }},
			{in: []in{{"left_table", "lhs1", "lhsValue1|returnNull", 0}}, out: two, store: two,
				check: func(t *testing.T, d *driver.Driver) { assert.False(t, subscribed(t, d, "lhs1", "rhs1")) }},
		}
	})
}

func TestForeignKeyJoinIgnoresOutOfOrderRecordsIffVersioned(t *testing.T) {
	var cases []fkTopology
	for _, lj := range []bool{true, false} {
		for _, lv := range []bool{false, true} {
			for _, rv := range []bool{false, true} {
				cases = append(cases, fkTopology{leftJoin: lj, leftVersioned: lv, rightVersioned: rv})
			}
		}
	}
	runFK(t, "KTableKTableForeignKeyJoinIntegrationTest.shouldIgnoreOutOfOrderRecordsIffVersioned", cases, outOfOrderSteps)
}

func outOfOrderSteps(c fkTopology) []fkStep {
	both := map[string]string{"lhs1": "(lhsValue1|rhs1,rhsValue1)", "lhs2": "(lhsValue2|rhs1,rhsValue1)"}
	one := map[string]string{"lhs1": "(lhsValue1|rhs1,rhsValue1)"}
	steps := []fkStep{
		{in: []in{{"right_table", "rhs1", "rhsValue1", 4}}},
		{in: []in{{"left_table", "lhs1", "lhsValue1|rhs1", 3}, {"left_table", "lhs2", "lhsValue2|rhs1", 5}}, out: both, store: both},
		{in: []in{{"left_table", "lhs2", null, 6}}, out: map[string]string{"lhs2": null}, store: one},
	}
	ooo := []in{{"left_table", "lhs1", "lhsValue1_ooo|rhs1", 2}, {"left_table", "lhs2", "lhsValue2_ooo|rhs1", 2}}
	if c.leftVersioned {
		steps = append(steps, fkStep{in: ooo, store: one}, fkStep{in: []in{{"left_table", "lhs1", null, 2}}, store: one})
	} else {
		both := map[string]string{"lhs1": "(lhsValue1_ooo|rhs1,rhsValue1)", "lhs2": "(lhsValue2_ooo|rhs1,rhsValue1)"}
		steps = append(steps, fkStep{in: ooo, out: both, store: both},
			fkStep{in: []in{{"left_table", "lhs1", null, 2}}, out: map[string]string{"lhs1": null},
				store: map[string]string{"lhs2": "(lhsValue2_ooo|rhs1,rhsValue1)"}})
	}
	news := map[string]string{"lhs1": "(lhsValue1_new|rhs1,rhsValue1)", "lhs2": "(lhsValue2_new|rhs1,rhsValue1)"}
	steps = append(steps, fkStep{in: []in{{"left_table", "lhs1", "lhsValue1_new|rhs1", 8}, {"left_table", "lhs2", "lhsValue2_new|rhs1", 8}}, out: news, store: news})
	switch {
	case c.rightVersioned:
		steps = append(steps, fkStep{in: []in{{"right_table", "rhs1", "rhsValue1_ooo", 1}}, store: news},
			fkStep{in: []in{{"right_table", "rhs1", null, 1}}, store: news})
	default:
		ooo := map[string]string{"lhs1": "(lhsValue1_new|rhs1,rhsValue1_ooo)", "lhs2": "(lhsValue2_new|rhs1,rhsValue1_ooo)"}
		steps = append(steps, fkStep{in: []in{{"right_table", "rhs1", "rhsValue1_ooo", 1}}, out: ooo, store: ooo})
		gone := map[string]string{"lhs1": null, "lhs2": null}
		var stored map[string]string
		if c.leftJoin {
			gone = map[string]string{"lhs1": "(lhsValue1_new|rhs1,null)", "lhs2": "(lhsValue2_new|rhs1,null)"}
			stored = gone
		}
		steps = append(steps, fkStep{in: []in{{"right_table", "rhs1", null, 1}}, out: gone, store: stored})
	}
	newest := map[string]string{"lhs1": "(lhsValue1_new|rhs1,rhsValue1_new)", "lhs2": "(lhsValue2_new|rhs1,rhsValue1_new)"}
	return append(steps, fkStep{in: []in{{"right_table", "rhs1", "rhsValue1_new", 6}}, out: newest, store: newest})
}

// The scenario test's serde variants (default, consumed, materialized,
// produced) have one counterpart here: every step is given its serdes.
func TestForeignKeyJoinScenarioWithDefaultSerdes(t *testing.T) {
	build := func(b *dsl.Builder) {
		a := dsl.TableFrom(b, "A", "a", text)
		bt := dsl.TableFrom(b, "B", "b", text)
		fk := dsl.JoinForeignKey(a, bt, "asdf", func(_ string, v string) (string, bool, error) {
			n, err := strconv.Atoi(strings.Split(v, "-")[0])
			return strconv.Itoa(n), true, err
		}, func(_, av, bv string) (string, error) { return pair("", av, bv, true), nil })
		dsl.JoinTables(a, fk, func(_, av, fv string) (string, error) { return pair("", av, fv, true), nil }).ToStream().To("out")
	}
	runSteps(t, "KTableKTableForeignKeyJoinScenarioTest.shouldWorkWithDefaultSerdes", build, false, []fkStep{
		{in: []in{{"A", "1", "999-alpha", 0}, {"B", "999", "beta", 0}}, out: map[string]string{"1": "(999-alpha,(999-alpha,beta))"}, storeName: "asdf"},
	})
}

// compositeKeys joins products keyed "<producer>:<product>" with
// producers, the producer taken by fk.
func compositeKeys(fk func(k, v string) string) func(b *dsl.Builder) {
	return func(b *dsl.Builder) {
		left := dsl.TableFrom(b, "left_table", "left", text)
		right := dsl.TableFrom(b, "right_table", "right", text)
		dsl.JoinForeignKey(left, right, "store", func(k, v string) (string, bool, error) { return fk(k, v), true, nil },
			func(_, l, r string) (string, error) { return pair("", l, r, true), nil }).ToStream().To("out")
	}
}

func TestForeignKeyJoinScenarioWithCompositeKeys(t *testing.T) {
	rights := []in{{"right_table", "producer1", "producer1-data", 0}, {"right_table", "producer2", "producer2-data", 0}}
	runSteps(t, "KTableKTableForeignKeyJoinScenarioTest.shouldWorkWithCompositeKeyAndProducerIdInValue",
		compositeKeys(func(_, v string) string { return strings.Split(v, "|")[0] }), false, []fkStep{{
			in: append([]in{{"left_table", "producer1:product1", "producer1|product1-data", 0}, {"left_table", "producer1:product2", "producer1|product2-data", 0},
				{"left_table", "producer2:product1", "producer2|product1-data", 0}}, rights...),
			out: map[string]string{"producer1:product1": "(producer1|product1-data,producer1-data)", "producer1:product2": "(producer1|product2-data,producer1-data)",
				"producer2:product1": "(producer2|product1-data,producer2-data)"},
			storeName: "unchecked",
		}})
	// KIP-1104: the extractor reads the key.
	runSteps(t, "KTableKTableForeignKeyJoinScenarioTest.shouldWorkWithCompositeKeyAndBiFunctionExtractor",
		compositeKeys(func(k, _ string) string { return strings.Split(k, ":")[0] }), false, []fkStep{{
			in: append([]in{{"left_table", "producer1:product1", "product1-data", 0}, {"left_table", "producer1:product2", "product2-data", 0},
				{"left_table", "producer2:product1", "product1-data", 0}}, rights...),
			out: map[string]string{"producer1:product1": "(product1-data,producer1-data)", "producer1:product2": "(product2-data,producer1-data)",
				"producer2:product1": "(product1-data,producer2-data)"},
			storeName: "unchecked",
		}})
}

// The Java test checks which topics the serdes were used for: the
// subscription and response topics and the changelogs, no other internal
// topic. Here: the join's internal topics, named after its store, and
// nothing else internal.
func TestForeignKeyJoinScenarioUsesExpectedTopics(t *testing.T) {
	b := dsl.NewBuilder("ktable-ktable-joinOnForeignKey")
	compositeKeys(func(_, v string) string { return strings.Split(v, "|")[1] })(b)
	topo, err := b.Build()
	require.NoError(t, err)
	var internal []string
	for _, ti := range topo.Topics() {
		if ti.Internal {
			internal = append(internal, ti.Name)
		}
	}
	assert.ElementsMatch(t, []string{"store-subscription-registration-topic", "store-subscription-response-topic"}, internal)
	d, err := driver.New(topo, driver.DefaultPartitions(2))
	require.NoError(t, err)
	pipeOne(t, d, in{"left_table", "2", "lhsValue1|1", 0})
	pipeOne(t, d, in{"right_table", "1", "rhsValue1", 0})
	assert.Equal(t, map[string]string{"2": "(lhsValue1|1,rhsValue1)"}, sinceLast(t, d, "out", map[string]int64{}))
}

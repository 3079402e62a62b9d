package sinkworker_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/connect"
	"github.com/causeway-stream/causeway/connect/postgres"
	"github.com/causeway-stream/causeway/framework"
	"github.com/causeway-stream/causeway/internal/pgtest"
	"github.com/causeway-stream/causeway/runtime/embedded"
	"github.com/causeway-stream/causeway/runtime/internal/transport"
	"github.com/causeway-stream/causeway/runtime/internal/transport/transporttest"
	"github.com/causeway-stream/causeway/runtime/sinkworker"
)

// cluster is the Postgres server the tests share; each test has a
// database of its own.
var cluster *pgtest.Cluster

func TestMain(m *testing.M) {
	if os.Getenv("CAUSEWAY_SINK_WORKER") != "" {
		os.Exit(runWorkerProcess())
	}
	os.Exit(pgtest.Main(m, &cluster))
}

// shop is a test's database and Kafka: customers and their orders, one
// topic each, orders keyed by order id and referencing a customer by a
// real foreign key, so the two are not co-partitioned.
type shop struct {
	t     *testing.T
	db    string // connection URL
	conn  *pgx.Conn
	kafka kafka
	// sessions, one per customer: an order claims its customer's record.
	sessions map[string]*causal.Session
	// procs are the worker processes spawned.
	procs []*process
}

const schema = `
CREATE TABLE customers (id text PRIMARY KEY, name text NOT NULL);
CREATE TABLE orders (id text PRIMARY KEY, customer text NOT NULL REFERENCES customers(id), amount int NOT NULL CHECK (amount >= 0));`

// kafka is where a shop's records are: the in-process Kafka
// (transporttest), on which the workers of most tests run in the test's
// process, or the embedded broker, which worker processes reach over TCP.
type kafka interface {
	// client is the client setting of a worker on it; empty for the
	// default.
	client() string
	bootstrap() string
	createTopics(partitions int32, topics ...string)
	// produce writes m outside any transaction and returns its offset.
	produce(m transport.Message) int64
	// records returns the committed records of a partition.
	records(ch causal.Channel) []transport.Message
}

// newShop is a shop on the in-process Kafka.
func newShop(t *testing.T) *shop {
	t.Helper()
	return newShopOn(t, cluster, newFake(t))
}

// newShopOn is a shop on the Postgres server c and k, with its topics.
func newShopOn(t *testing.T, c *pgtest.Cluster, k kafka) *shop {
	t.Helper()
	ctx := context.Background()
	name := strings.ToLower(strings.NewReplacer("/", "_", " ", "_").Replace(t.Name()))
	url, err := c.CreateDatabase(ctx, name)
	require.NoError(t, err)
	conn, err := pgx.Connect(ctx, url)
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close(context.Background()) })
	_, err = conn.Exec(ctx, schema)
	require.NoError(t, err)

	k.createTopics(2, "customers", "orders")
	k.createTopics(1, "dead")
	return &shop{t: t, db: url, conn: conn, kafka: k, sessions: map[string]*causal.Session{}}
}

// fake is the in-process Kafka.
type fake struct {
	t *testing.T
	c *transporttest.Cluster
}

func newFake(t *testing.T) fake { return fake{t: t, c: transporttest.New(t)} }

func (f fake) client() string    { return f.c.Client() }
func (f fake) bootstrap() string { return f.c.Bootstrap() }
func (f fake) createTopics(partitions int32, topics ...string) {
	for _, name := range topics {
		require.NoError(f.t, f.c.CreateTopic(name, partitions, nil))
	}
}
func (f fake) produce(m transport.Message) int64 {
	off, err := f.c.Produce(m)
	require.NoError(f.t, err)
	return off
}
func (f fake) records(ch causal.Channel) []transport.Message { return f.c.Records(ch) }

// kafkaOn is the in-process Kafka, or the embedded broker with workers
// on client.
func kafkaOn(t *testing.T, client string) kafka {
	if client == transporttest.InProcess {
		return newFake(t)
	}
	b := newBroker(t)
	b.workers = client
	return b
}

// broker is the embedded broker, and a client of the test's on it.
type broker struct {
	t  *testing.T
	b  *embedded.Broker
	cl *kgo.Client
	// workers is the client of the workers on it; empty for the default.
	workers string
}

func newBroker(t *testing.T) broker {
	t.Helper()
	b, err := embedded.Start()
	require.NoError(t, err)
	t.Cleanup(b.Close)
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	require.NoError(t, err)
	t.Cleanup(cl.Close)
	return broker{t: t, b: b, cl: cl}
}

func (k broker) client() string    { return k.workers }
func (k broker) bootstrap() string { return k.b.Addr() }
func (k broker) createTopics(partitions int32, topics ...string) {
	_, err := kadm.NewClient(k.cl).CreateTopics(context.Background(), partitions, 1, nil, topics...)
	require.NoError(k.t, err)
}
func (k broker) produce(m transport.Message) int64 {
	rec := &kgo.Record{Topic: m.Topic, Partition: m.Partition, Key: m.Key, Value: m.Value}
	for _, h := range m.Headers {
		rec.Headers = append(rec.Headers, kgo.RecordHeader{Key: h.Key, Value: h.Value})
	}
	res := k.cl.ProduceSync(context.Background(), rec)
	require.NoError(k.t, res.FirstErr())
	return res[0].Record.Offset
}

// records reads a partition to its last stable offset: what read
// committed can see now (a transaction a killed worker left open does
// not hold the read up).
func (k broker) records(ch causal.Channel) []transport.Message {
	k.t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(k.b.Addr()), kgo.KeepControlRecords(), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{ch.Topic: {ch.Partition: kgo.NewOffset().AtStart()}}))
	require.NoError(k.t, err)
	defer cl.Close()
	end, err := kadm.NewClient(cl).ListCommittedOffsets(context.Background(), ch.Topic)
	require.NoError(k.t, err)
	want, _ := end.Lookup(ch.Topic, ch.Partition)
	var out []transport.Message
	for next := int64(0); next < want.Offset; {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		fs := cl.PollFetches(ctx)
		timedOut := ctx.Err() != nil
		cancel()
		require.False(k.t, timedOut, "read %s to offset %d", ch, want.Offset)
		fs.EachRecord(func(r *kgo.Record) {
			next = r.Offset + 1
			if r.Attrs.IsControl() {
				return
			}
			m := transport.Message{Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Key: r.Key, Value: r.Value}
			for _, h := range r.Headers {
				m.Headers = append(m.Headers, framework.Header{Key: h.Key, Value: h.Value})
			}
			out = append(out, m)
		})
	}
	return out
}

// produce writes one record to topic/partition in customer's session,
// and records it there.
func (s *shop) produce(topic string, partition int32, customer, key, value string) {
	s.t.Helper()
	sess := s.sessions[customer]
	if sess == nil {
		sess = &causal.Session{}
		s.sessions[customer] = sess
	}
	off := s.kafka.produce(transport.Message{Topic: topic, Partition: partition, Key: []byte(key), Value: []byte(value),
		Headers: []framework.Header{{Key: causal.HeaderKey, Value: sess.AppendHeader(nil)}}})
	sess.Produced(causal.Channel{Topic: topic, Partition: partition}, off)
}

// orderShop writes customers c00..c19 (even ones on partition 0, odd on
// 1) and 60 orders over both orders partitions, each for customer
// j%20 and claiming that customer's record. It returns how many orders
// are for a customer on customers/1.
func (s *shop) orderShop() (onOne int) {
	for i := range 20 {
		c := fmt.Sprintf("c%02d", i)
		s.produce("customers", int32(i%2), c, c, fmt.Sprintf(`{"name": "customer %d"}`, i))
	}
	for j := range 60 {
		c, o := fmt.Sprintf("c%02d", j%20), fmt.Sprintf("o%03d", j)
		s.produce("orders", int32(j%2), c, o, fmt.Sprintf(`{"customer": %q, "amount": %d}`, c, j))
		if j%20%2 == 1 {
			onOne++
		}
	}
	return onOne
}

// worker runs a sink worker writing the shop's topics until the test
// ends or stop is called; it returns the worker and stop, which returns
// Run's error.
func (s *shop) worker(chs []causal.Channel, mutate func(*sinkworker.Config)) (*sinkworker.Worker, func() error) {
	w, stop, _ := s.workerDone(chs, mutate)
	return w, stop
}

// workerDone is worker, with a channel closed when Run returns.
func (s *shop) workerDone(chs []causal.Channel, mutate func(*sinkworker.Config)) (*sinkworker.Worker, func() error, <-chan struct{}) {
	s.t.Helper()
	ctx := context.Background()
	def := postgres.Sink{}
	cfg, err := def.Config().Parse(map[string]string{postgres.ConnectionURL: s.db, postgres.PKMode: "record_key"})
	require.NoError(s.t, err)
	task, err := def.Open(ctx, "shop", []string{"customers", "orders"}, cfg)
	require.NoError(s.t, err)
	wc := sinkworker.Config{Connector: "shop", Topics: []string{"customers", "orders"}, Task: task, Bootstrap: s.kafka.bootstrap(),
		Client: s.kafka.client(), Channels: chs, DeadLetterTopic: "dead", ToleranceAll: true, InstanceID: instanceOf(chs), Log: zaptest.NewLogger(s.t)}
	if mutate != nil {
		mutate(&wc)
	}
	w, err := sinkworker.New(wc)
	require.NoError(s.t, err)
	runCtx, cancel := context.WithCancel(ctx)
	var once sync.Once
	var runErr error
	done := make(chan struct{})
	go func() {
		defer close(done)
		runErr = w.Run(runCtx)
	}()
	stop := func() error {
		once.Do(func() {
			cancel()
			<-done
		})
		return runErr
	}
	s.t.Cleanup(func() { _ = stop() })
	return w, stop, done
}

// instanceOf names the worker of chs, for its client ids.
func instanceOf(chs []causal.Channel) string {
	var b strings.Builder
	for _, ch := range chs {
		fmt.Fprintf(&b, "%s%d.", ch.Topic, ch.Partition)
	}
	return b.String()
}

// positions lists the sink's positions, as topic/partition=next.
func (s *shop) positions() []string {
	s.t.Helper()
	rows, err := s.conn.Query(context.Background(), "SELECT topic || '/' || partition || '=' || next_offset FROM causeway_sink_positions ORDER BY 1")
	require.NoError(s.t, err)
	positions, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(s.t, err)
	return positions
}

// count returns the rows of table.
func (s *shop) count(table string) int {
	s.t.Helper()
	var n int
	require.NoError(s.t, s.conn.QueryRow(context.Background(), "SELECT count(*) FROM "+table).Scan(&n))
	return n
}

// deadLetters reads the dead-letter topic to its end: each letter's
// reason.
func (s *shop) deadLetters() []string {
	s.t.Helper()
	var out []string
	for _, m := range s.kafka.records(causal.Channel{Topic: "dead"}) {
		if reason, ok := framework.Record(m).Header(sinkworker.HeaderMessage); ok {
			out = append(out, string(reason))
		}
	}
	return out
}

// eventually waits up to a minute for cond.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// foreignKeyViolations counts the reasons that are Postgres's foreign key
// violations (SQLSTATE 23503).
func foreignKeyViolations(reasons []string) int {
	n := 0
	for _, r := range reasons {
		if strings.Contains(r, "SQLSTATE 23503") {
			n++
		}
	}
	return n
}

// Orders written by one task while their customers' partition is written
// by another that lags: with the gate, an order waits in the worker until
// the database holds its customer, and no foreign key is ever broken;
// without it (the negative control), every order of a lagging customer is
// refused by the database.
func TestAnOrderIsWrittenOnlyAfterItsCustomer(t *testing.T) {
	for _, client := range transporttest.Kafkas() {
		for _, gateOff := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/gate off %v", client, gateOff), func(t *testing.T) {
				t.Parallel()
				s := newShopOn(t, cluster, kafkaOn(t, client))
				onOne := s.orderShop()
				lagging := causal.Channel{Topic: "customers", Partition: 1}
				set := func(c *sinkworker.Config) { c.GateOff = gateOff }
				a, stopA := s.worker([]causal.Channel{{Topic: "customers"}, {Topic: "orders"}, {Topic: "orders", Partition: 1}}, set)
				if gateOff {
					eventually(t, "every order handled", func() bool { st := a.Status(); return st.Written+st.Rejected == 70 })
				} else {
					eventually(t, "orders waiting for customers/1", func() bool { return len(a.Status().Waiting) > 0 })
					assert.Contains(t, a.Status().Waiting, lagging)
					assert.Less(t, s.count("orders"), 60, "orders of customers not written yet wait")
				}
				_, stopB := s.worker([]causal.Channel{lagging}, set)
				eventually(t, "every customer written", func() bool { return s.count("customers") == 20 })
				eventually(t, "every order handled", func() bool { st := a.Status(); return st.Written+st.Rejected == 70 })
				require.NoError(t, stopA())
				require.NoError(t, stopB())

				violations := foreignKeyViolations(s.deadLetters())
				if gateOff {
					// At least every order of a lagging customer; more when the
					// orders were fetched before customers/0 too.
					assert.GreaterOrEqual(t, violations, onOne, "without the gate, each order of a lagging customer breaks the foreign key")
					assert.Equal(t, 60-violations, s.count("orders"))
					return
				}
				assert.Zero(t, violations)
				assert.Equal(t, 60, s.count("orders"), "every order written")
				assert.Zero(t, a.Status().Rejected)
			})
		}
	}
}

// A worker that stops and a new one that starts write every record once:
// the new one resumes from the positions in the database (written in the
// same transaction as the rows), so it writes only what came after.
func TestARestartResumesFromThePositionsInTheDatabase(t *testing.T) {
	t.Parallel()
	s := newShop(t)
	all := []causal.Channel{{Topic: "customers"}, {Topic: "customers", Partition: 1}, {Topic: "orders"}, {Topic: "orders", Partition: 1}}
	s.orderShop()
	first, stop := s.worker(all, nil)
	eventually(t, "the first 80 records", func() bool { return s.count("orders") == 60 })
	require.NoError(t, stop())
	assert.Equal(t, 80, first.Status().Written)

	for j := 60; j < 90; j++ {
		c, o := fmt.Sprintf("c%02d", j%20), fmt.Sprintf("o%03d", j)
		s.produce("orders", int32(j%2), c, o, fmt.Sprintf(`{"customer": %q, "amount": %d}`, c, j))
	}
	second, stop := s.worker(all, nil)
	eventually(t, "the next 30", func() bool { return s.count("orders") == 90 })
	require.NoError(t, stop())
	assert.Equal(t, 30, second.Status().Written, "only what came after the first worker's last commit")
	assert.Zero(t, second.Status().Rejected, "no row written twice (its key would be refused)")
	var positions []string
	rows, err := s.conn.Query(context.Background(), "SELECT topic || '/' || partition || '=' || next_offset FROM causeway_sink_positions ORDER BY 1")
	require.NoError(t, err)
	positions, err = pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	assert.Equal(t, []string{"customers/0=10", "customers/1=10", "orders/0=45", "orders/1=45"}, positions)
}

// A row the database refuses on its own merits (a CHECK constraint) goes
// to the dead-letter topic with the database's error, and the records
// around it are written; without errors.tolerance=all the worker stops,
// naming the record.
func TestARefusedRowGoesToTheDeadLetterTopic(t *testing.T) {
	t.Parallel()
	for _, tolerate := range []bool{true, false} {
		t.Run(fmt.Sprintf("tolerate %v", tolerate), func(t *testing.T) {
			t.Parallel()
			s := newShop(t)
			s.produce("customers", 0, "c00", "c00", `{"name": "one"}`)
			for j, amount := range []int{1, -5, 3} {
				s.produce("orders", 0, "c00", fmt.Sprintf("o%d", j), fmt.Sprintf(`{"customer": "c00", "amount": %d}`, amount))
			}
			all := []causal.Channel{{Topic: "customers"}, {Topic: "customers", Partition: 1}, {Topic: "orders"}, {Topic: "orders", Partition: 1}}
			_, stop, done := s.workerDone(all, func(c *sinkworker.Config) { c.ToleranceAll = tolerate })
			if !tolerate {
				select {
				case <-done:
				case <-time.After(time.Minute):
					t.Fatal("the worker did not stop on the refused row")
				}
				err := stop()
				require.Error(t, err)
				assert.Contains(t, err.Error(), "orders/0@1")
				assert.Contains(t, err.Error(), "orders_amount_check")
				var next int64
				err = s.conn.QueryRow(context.Background(), "SELECT coalesce(max(next_offset), 0) FROM causeway_sink_positions WHERE topic = 'orders'").Scan(&next)
				require.NoError(t, err)
				assert.LessOrEqual(t, next, int64(1), "no position committed past the refused record")
				assert.Zero(t, s.count("orders WHERE id = 'o2'"), "nothing after it committed")
				return
			}
			eventually(t, "both good orders", func() bool { return s.count("orders") == 2 })
			require.NoError(t, stop())
			letters := s.deadLetters()
			require.Len(t, letters, 1)
			assert.Contains(t, letters[0], "orders_amount_check")
		})
	}
}

// runWorkerProcess is the test binary as a sink worker process of the
// shop connector, in the group, configured by the environment; it runs
// until SIGTERM or SIGKILL.
func runWorkerProcess() int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	def := postgres.Sink{}
	cfg, err := def.Config().Parse(map[string]string{postgres.ConnectionURL: os.Getenv("SINK_DB"), postgres.PKMode: "record_key"})
	if err == nil {
		var task connect.SinkTask
		if task, err = def.Open(ctx, "shop", []string{"customers", "orders"}, cfg); err == nil {
			var w *sinkworker.Worker
			w, err = sinkworker.New(sinkworker.Config{Connector: "shop", Topics: []string{"customers", "orders"}, Task: task,
				Bootstrap: os.Getenv("SINK_BOOTSTRAP"), Client: os.Getenv("SINK_CLIENT"), InstanceID: os.Getenv("SINK_INSTANCE"),
				DeadLetterTopic: "dead", ToleranceAll: true, Log: processLog(os.Getenv("SINK_INSTANCE")),
				// A killed member leaves the group sooner than by default (6 s
				// is the least a broker takes by default).
				Kafka: map[string]string{"session.timeout.ms": "6000", "heartbeat.interval.ms": "500"}})
			if err == nil {
				err = w.Run(ctx)
			}
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "sink worker:", err)
		return 1
	}
	return 0
}

// processLog is a worker process's log: what it says at Info and above,
// on its standard error, named by its instance.
func processLog(instance string) *zap.Logger {
	cfg := zap.NewDevelopmentConfig()
	cfg.Level = zap.NewAtomicLevelAt(zap.InfoLevel)
	log, err := cfg.Build()
	if err != nil {
		return zap.NewNop()
	}
	return log.Named(instance)
}

// spawn starts a sink worker process in the shop's group; it is killed
// when the test ends.
func (s *shop) spawn(client, instance string) *process {
	s.t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run", "^$")
	cmd.Env = append(os.Environ(), "CAUSEWAY_SINK_WORKER=1", "SINK_DB="+s.db, "SINK_BOOTSTRAP="+s.kafka.bootstrap(),
		"SINK_CLIENT="+client, "SINK_INSTANCE="+client+"-"+instance)
	p := &process{cmd: cmd}
	cmd.Stdout, cmd.Stderr = os.Stderr, io.MultiWriter(os.Stderr, p)
	require.NoError(s.t, cmd.Start())
	s.procs = append(s.procs, p)
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait() // the test looks at what the database holds, not at how the process ended
		close(done)
	}()
	s.t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
	})
	return p
}

// process is a worker process and what it has logged.
type process struct {
	cmd *exec.Cmd
	mu  sync.Mutex
	log []byte
}

func (p *process) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.log = append(p.log, b...)
	return len(b), nil
}

// said reports whether the process has logged what.
func (p *process) said(what string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Contains(string(p.log), what)
}

// Sink workers in one group while orders keep coming; one is killed with
// SIGKILL mid-stream and another takes its place. In the end every record
// is in the database once: as many rows as records, none refused (a row
// written twice would break its primary key), no foreign key broken, and
// each channel's position in the database at the end of its partition.
func TestSinkWorkersKilledWriteEveryRecordOnce(t *testing.T) {
	for _, client := range transport.Clients() {
		t.Run(client, func(t *testing.T) {
			t.Parallel()
			s := newShopOn(t, cluster, newBroker(t))
			for i := range 40 {
				c := fmt.Sprintf("c%02d", i)
				s.produce("customers", int32(i%2), c, c, fmt.Sprintf(`{"name": "customer %d"}`, i))
			}
			first := s.spawn(client, "a")
			s.spawn(client, "b")
			const orders = 1200
			for j := range orders {
				c, o := fmt.Sprintf("c%02d", j%40), fmt.Sprintf("o%04d", j)
				s.produce("orders", int32(j%2), c, o, fmt.Sprintf(`{"customer": %q, "amount": %d}`, c, j))
				if j == orders/3 {
					// Killed once it writes channels of its own: the
					// embedded broker's group has been seen to complete
					// no rebalance after a member died between joining
					// and syncing.
					eventually(t, "the first worker assigned channels", func() bool { return first.said(`"starts": "map[c`) })
					eventually(t, "some orders written", func() bool { return s.count("orders") > 0 })
					require.NoError(t, first.cmd.Process.Kill())
					s.spawn(client, "c")
				}
			}
			deadline := time.Now().Add(time.Minute)
			for s.count("orders") != orders {
				if time.Now().After(deadline) {
					for _, p := range s.procs {
						_ = p.cmd.Process.Signal(syscall.SIGQUIT) // its goroutines, on its standard error
					}
					time.Sleep(2 * time.Second)
					t.Fatalf("timed out with %d orders of %d written; positions %v", s.count("orders"), orders, s.positions())
				}
				time.Sleep(20 * time.Millisecond)
			}
			assert.Equal(t, 40, s.count("customers"))
			letters := s.deadLetters()
			assert.Zero(t, len(letters), "no row refused: none written twice, no foreign key broken; the first: %.300s", strings.Join(letters, "; "))
			assert.Equal(t, []string{"customers/0=20", "customers/1=20", "orders/0=600", "orders/1=600"}, s.positions())
		})
	}
}

// A database outage shorter than the retries' span costs the sink no
// failure: a commit that fails on a transient error is tried again,
// RetryBackoff apart, with the same records and positions, and every
// record is written once. Without retries (Kafka Connect's JDBC sink with
// max.retries=0, and Causeway before it had them) the first failed commit
// stops the worker.
func TestASinkRidesOutADatabaseRestart(t *testing.T) {
	t.Parallel()
	for _, retries := range []int{20, 0} {
		t.Run(fmt.Sprintf("max retries %d", retries), func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			own, err := pgtest.Start(ctx)
			require.NoError(t, err)
			t.Cleanup(func() { _ = own.Stop() })
			s := newShopOn(t, own, newFake(t))
			s.produce("customers", 0, "c00", "c00", `{"name": "one"}`)
			all := []causal.Channel{{Topic: "customers"}, {Topic: "customers", Partition: 1}, {Topic: "orders"}, {Topic: "orders", Partition: 1}}
			_, stop, done := s.workerDone(all, func(c *sinkworker.Config) {
				c.MaxRetries, c.RetryBackoff = retries, 250*time.Millisecond
			})
			eventually(t, "the customer written", func() bool { return s.count("customers") == 1 })
			s.conn.Close(ctx) // the test's own connection goes with the server

			require.NoError(t, own.Pause(ctx))
			for j := range 20 {
				s.produce("orders", int32(j%2), "c00", fmt.Sprintf("o%02d", j), fmt.Sprintf(`{"customer": "c00", "amount": %d}`, j))
			}
			time.Sleep(2 * time.Second) // commits fail meanwhile
			require.NoError(t, own.Resume(ctx))
			conn, err := pgx.Connect(ctx, s.db)
			require.NoError(t, err)
			t.Cleanup(func() { conn.Close(context.Background()) })
			s.conn = conn

			if retries == 0 {
				select {
				case <-done:
				case <-time.After(30 * time.Second):
					t.Fatal("without retries, the worker went on after a failed commit")
				}
				err := stop()
				require.Error(t, err)
				assert.True(t, connect.IsRetriable(err), "the failure says it was transient: %v", err)
				return
			}
			eventually(t, "every order written after the outage", func() bool { return s.count("orders") == 20 })
			select {
			case <-done:
				t.Fatalf("the worker stopped: %v", stop())
			default:
			}
			require.NoError(t, stop())
			assert.Equal(t, 20, s.count("orders"), "each order once")
			assert.Empty(t, s.deadLetters())
		})
	}
}

// A sink started before its topics exist waits for them, saying which,
// and writes once they are created: Kafka Connect's sinks do so, and a
// Causeway sink used to stop at once. Its dead-letter topic it makes
// itself, as Kafka Connect does.
func TestASinkWaitsForItsTopics(t *testing.T) {
	t.Parallel()
	s := newShop(t)
	late := newFake(t)
	s.kafka = late

	all := []causal.Channel{{Topic: "customers"}, {Topic: "customers", Partition: 1}, {Topic: "orders"}, {Topic: "orders", Partition: 1}}
	w, stop, done := s.workerDone(all, nil)
	eventually(t, "the status naming the missing topics", func() bool {
		return slices.Equal(w.Status().MissingTopics, []string{"customers", "orders"})
	})
	select {
	case <-done:
		t.Fatalf("the worker stopped: %v", stop())
	default:
	}
	late.createTopics(2, "customers", "orders")
	s.produce("customers", 0, "c00", "c00", `{"name": "one"}`)
	s.produce("orders", 1, "c00", "o1", `{"customer": "c00", "amount": 1}`)
	eventually(t, "the order written", func() bool { return s.count("orders") == 1 })
	assert.Empty(t, w.Status().MissingTopics)
	require.NoError(t, stop())
}

// A refused record larger than the sink's bound for dead letters reaches
// the dead-letter topic cut to fit, its headers saying what was cut and
// how large it was, as the stream worker's dead letters do: a refused or
// skipped record always has somewhere to go.
func TestADeadLetterTooLargeIsCutToFit(t *testing.T) {
	t.Parallel()
	s := newShop(t)
	s.produce("customers", 0, "c00", "c00", `{"name": "one"}`)
	note := strings.Repeat("n", 2000)
	s.produce("orders", 0, "c00", "o1", `{"customer": "c00", "amount": -5, "note": "`+note+`"}`)
	all := []causal.Channel{{Topic: "customers"}, {Topic: "customers", Partition: 1}, {Topic: "orders"}, {Topic: "orders", Partition: 1}}
	_, stop := s.worker(all, func(c *sinkworker.Config) { c.MaxRecordBytes, c.TaskID, c.Class = 1000, 3, "PostgresSink" })
	var dead []transport.Message
	eventually(t, "the dead letter", func() bool {
		dead = s.kafka.records(causal.Channel{Topic: "dead"})
		return len(dead) > 0
	})
	require.NoError(t, stop())
	headers := map[string]string{}
	size := len(dead[0].Key) + len(dead[0].Value)
	for _, h := range dead[0].Headers {
		headers[h.Key] = string(h.Value)
		size += len(h.Key) + len(h.Value)
	}
	assert.Equal(t, "value", headers[framework.HeaderDLQTruncated])
	assert.Equal(t, fmt.Sprint(len("o1")+len(`{"customer": "c00", "amount": -5, "note": "`+note+`"}`)), headers[framework.HeaderDLQOriginalSize])
	assert.Contains(t, headers[sinkworker.HeaderMessage], `has no column "note"`)
	// Kafka Connect's whole context set (KIP-298).
	assert.Equal(t, map[string]string{"topic": "orders", "partition": "0", "offset": "0", "connector.name": "shop", "task.id": "3",
		"stage": sinkworker.StageTaskPut, "class.name": "PostgresSink"}, map[string]string{
		"topic": headers[framework.ConnectHeaderTopic], "partition": headers[framework.ConnectHeaderPartition],
		"offset": headers[framework.ConnectHeaderOffset], "connector.name": headers[framework.ConnectHeaderConnector],
		"task.id": headers[framework.ConnectHeaderTask], "stage": headers[framework.ConnectHeaderStage],
		"class.name": headers[framework.ConnectHeaderClass]})
	assert.NotEmpty(t, headers[framework.ConnectHeaderExceptionClass])
	assert.NotEmpty(t, headers[framework.ConnectHeaderExceptionStacktrace])
	assert.LessOrEqual(t, size, 1000)
	assert.True(t, strings.HasPrefix(`{"customer": "c00", "amount": -5, "note": "`+note, string(dead[0].Value)), "the value's start is kept")
}

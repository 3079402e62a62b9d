package runtime

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/framework"
	"github.com/causeway-stream/causeway/framework/store"
	"github.com/causeway-stream/causeway/framework/task"
	"github.com/causeway-stream/causeway/runtime/embedded"
)

// TaskState is where a task is in its life.
type TaskState string

// Task states, as /status reports them.
const (
	StateRestoring TaskState = "RESTORING"
	StateRunning   TaskState = "RUNNING"
	StateFailed    TaskState = "FAILED"
)

// ErrNoTask is returned by RestartTask for a task this worker does not run.
var ErrNoTask = errors.New("no such task on this worker")

// ErrStopped is returned by calls on a worker that has stopped.
var ErrStopped = errors.New("worker stopped")

type runningTask struct {
	id        string
	processor string
	partition int32
	t         *task.Task
	state     TaskState
	err       error
	// streamed counts outputs produced into the open transaction.
	streamed int
	// touched is set while the task is on the worker's touched list.
	touched bool
	// committed is the next offset per input topic as last committed (or
	// seeded), which is what the task resumes from.
	committed map[string]int64
	blocked   map[causal.Channel]blockedSince
}

type blockedSince struct {
	on      causal.Channel
	off     int64
	since   time.Time
	checked time.Time // when the claim was last checked against the broker
}

type restartRequest struct {
	id    string
	reply chan error
}

// Worker runs a topology against Kafka. Build it with NewWorker, then Start
// and Stop it (Module does this with fx). Its methods are safe for
// concurrent use.
type Worker struct {
	cfg     Config
	topo    *framework.Topology
	log     *zap.Logger
	metrics *Metrics
	now     func() time.Time

	bootstrap  string
	instanceID string
	broker     *embedded.Broker
	consumer   *kafka.Consumer
	producer   *kafka.Producer
	admin      *kafka.AdminClient
	counts     map[string]int32

	// Owned by the pump goroutine.
	tasks     []*runningTask
	byChannel map[causal.Channel][]*runningTask
	paused    map[causal.Channel]bool
	assigned  []kafka.TopicPartition
	fatalErr  error
	// failedCommits counts transactions failed in a row, for backoff.
	failedCommits int
	// inTxn is set while a transaction is open: outputs stream into it as
	// tasks emit them, and commit closes it.
	inTxn bool
	// outTopics holds what the worker keeps per output topic; lastOut is
	// the one the last output went to, which the next mostly goes to too.
	outTopics map[string]*outTopic
	lastOut   *outTopic
	// polled holds the events of one poll batch until they are handled.
	polled []kafka.Event
	// pollConsumer is the consumer's Poll, as wrapPoll (set by tests
	// only, before Start) wraps it.
	pollConsumer func(timeoutMs int) kafka.Event
	wrapPoll     func(poll func(timeoutMs int) kafka.Event) func(timeoutMs int) kafka.Event
	// touched is the tasks the events handled since the last stream went
	// to: the only ones with outputs to stream.
	touched []*runningTask
	// recordsIn caches the input counter of each topic.
	recordsIn map[string]prometheus.Counter
	// lastRoute is where the last message's channel led: consecutive
	// messages mostly come from the same partition, and comparing the
	// channel costs less than two map lookups by string. index and
	// closeTasks clear it.
	lastRoute route
	// headerSlab is carved into the header lists of received records.
	headerSlab []framework.Header
	// out and outHeaders are reused for every output produced: Produce
	// copies the message before it returns.
	out        kafka.Message
	outHeaders []kafka.Header
	// pumpTime is when the pump last polled: the tasks' clock while they
	// handle what that poll returned, so that a record costs no clock read
	// of its own.
	pumpTime time.Time
	// mustAbort is set when a task failed mid-processing after streaming
	// outputs into the open transaction: those outputs cannot be committed
	// without the offsets the failed task no longer has.
	mustAbort bool

	restarts chan restartRequest
	stop     chan struct{}
	done     chan struct{}
	stopOnce sync.Once

	mu     sync.Mutex
	status Status
	err    error
}

// NewWorker checks the configuration and returns a worker that has not
// started.
func NewWorker(cfg Config, topo *framework.Topology, log *zap.Logger, metrics *Metrics) (*Worker, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if topo == nil {
		return nil, errors.New("runtime: no topology")
	}
	if log == nil {
		log = zap.NewNop()
	}
	if metrics == nil {
		metrics = NewMetrics()
	}
	return &Worker{
		cfg: cfg, topo: topo, log: log, metrics: metrics, now: time.Now,
		byChannel: map[causal.Channel][]*runningTask{},
		paused:    map[causal.Channel]bool{},
		outTopics: map[string]*outTopic{},
		recordsIn: map[string]prometheus.Counter{},
		restarts:  make(chan restartRequest),
		stop:      make(chan struct{}),
		done:      make(chan struct{}),
	}, nil
}

// Bootstrap returns the brokers the worker uses (the embedded broker's
// address when it started one).
func (w *Worker) Bootstrap() string { return w.bootstrap }

// Start connects to Kafka (starting the embedded broker when no bootstrap
// servers are configured), creates internal topics, initialises the
// transactional producer, subscribes, and starts processing.
func (w *Worker) Start(ctx context.Context) error {
	if err := os.MkdirAll(w.cfg.StateDir, 0o755); err != nil {
		return fmt.Errorf("state dir: %w", err)
	}
	id, err := w.loadInstanceID()
	if err != nil {
		return err
	}
	w.instanceID = id
	w.bootstrap = w.cfg.BootstrapServers
	if w.bootstrap == "" {
		dir := filepath.Join(w.cfg.StateDir, "broker")
		b, err := embedded.Start(embedded.DataDir(dir))
		if err != nil {
			return err
		}
		w.broker, w.bootstrap = b, b.Addr()
		w.log.Info("no bootstrap servers given: started the embedded broker", zap.String("addr", w.bootstrap), zap.String("data_dir", dir))
	}
	if err := w.connect(ctx); err != nil {
		w.closeClients()
		return err
	}
	go w.run()
	return nil
}

func (w *Worker) loadInstanceID() (string, error) {
	if w.cfg.InstanceID != "" {
		return w.cfg.InstanceID, nil
	}
	path := filepath.Join(w.cfg.StateDir, "instance-id")
	if b, err := os.ReadFile(path); err == nil && validID.Match(b) {
		return string(b), nil
	}
	var raw [8]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", fmt.Errorf("instance id: %w", err)
	}
	id := hex.EncodeToString(raw[:])
	if err := os.WriteFile(path, []byte(id), 0o644); err != nil {
		return "", fmt.Errorf("instance id: %w", err)
	}
	return id, nil
}

func (w *Worker) connect(ctx context.Context) error {
	p, err := kafka.NewProducer(ptr(w.producerConfigWithoutReports()))
	if err != nil {
		return fmt.Errorf("producer: %w", err)
	}
	w.producer = p
	if w.admin, err = kafka.NewAdminClientFromProducer(p); err != nil {
		return fmt.Errorf("admin client: %w", err)
	}
	if w.counts, err = w.ensureTopics(ctx, w.admin); err != nil {
		return err
	}
	if err := p.InitTransactions(ctx); err != nil {
		return fmt.Errorf("init transactions (transactional id %s-%s): %w", w.cfg.ApplicationID, w.instanceID, err)
	}
	if w.consumer, err = kafka.NewConsumer(ptr(w.consumerConfig())); err != nil {
		return fmt.Errorf("consumer: %w", err)
	}
	w.pollConsumer = w.consumer.Poll
	if w.wrapPoll != nil {
		w.pollConsumer = w.wrapPoll(w.pollConsumer)
	}
	var inputs []string
	for _, pi := range w.topo.Processors() {
		for _, in := range pi.Inputs {
			if !slices.Contains(inputs, in) {
				inputs = append(inputs, in)
			}
		}
	}
	slices.Sort(inputs)
	if err := w.consumer.SubscribeTopics(inputs, w.rebalance); err != nil {
		return fmt.Errorf("subscribe %v: %w", inputs, err)
	}
	w.log.Info("worker started", zap.String("application_id", w.cfg.ApplicationID), zap.String("instance_id", w.instanceID),
		zap.Strings("inputs", inputs), zap.Bool("gate_off", w.cfg.GateOff))
	return nil
}

func (w *Worker) producerConfigWithoutReports() kafka.ConfigMap {
	cm := w.producerConfig()
	// Delivery failures surface through CommitTransaction; no report channel
	// to drain.
	cm["go.delivery.reports"] = false
	return cm
}

func ptr(cm kafka.ConfigMap) *kafka.ConfigMap { return &cm }

// Stop finishes the open work (one last commit), leaves the group and
// closes the clients, within ctx or the configured shutdown timeout.
func (w *Worker) Stop(ctx context.Context) error {
	w.stopOnce.Do(func() { close(w.stop) })
	ctx, cancel := context.WithTimeout(ctx, w.cfg.ShutdownTimeout)
	defer cancel()
	select {
	case <-w.done:
	case <-ctx.Done():
		return fmt.Errorf("stop: %w", ctx.Err())
	}
	return w.Err()
}

// Done is closed when the worker has stopped, by Stop or by a fatal error.
func (w *Worker) Done() <-chan struct{} { return w.done }

// Err returns the fatal error that stopped the worker, if any.
func (w *Worker) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// RestartTask rebuilds a task from its committed state (after fixing what
// made it fail, say). It returns ErrNoTask for a task the worker does not
// run.
func (w *Worker) RestartTask(ctx context.Context, id string) error {
	req := restartRequest{id: id, reply: make(chan error, 1)}
	select {
	case w.restarts <- req:
	case <-w.done:
		return ErrStopped
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-req.reply:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// run is the pump: the only goroutine that touches the clients and tasks.
func (w *Worker) run() {
	defer close(w.done)
	defer w.closeClients()
	w.pumpTime = w.now()
	nextCommit := w.pumpTime.Add(w.cfg.CommitInterval)
	// Stop and restart requests are looked at when the consumer is idle and
	// every so many events otherwise: a select per record costs more than the
	// record's own bookkeeping.
	const eventsPerCheck = 64
	sinceCheck := 0
	for {
		if sinceCheck == 0 {
			select {
			case <-w.stop:
				w.shutdown()
				return
			case req := <-w.restarts:
				req.reply <- w.restart(req.id)
			default:
			}
		}
		n := w.poll()
		w.pumpTime = w.now()
		w.handlePolled()
		if sinceCheck += n; n == 0 || sinceCheck >= eventsPerCheck {
			sinceCheck = 0
		}
		if w.fatalErr == nil && !w.pumpTime.Before(nextCommit) {
			w.tick()
			nextCommit = w.now().Add(w.cfg.CommitInterval)
		}
		if w.fatalErr != nil {
			w.mu.Lock()
			w.err = w.fatalErr
			w.mu.Unlock()
			w.log.Error("worker stopping on a fatal error", zap.Error(w.fatalErr))
			return
		}
	}
}

func (w *Worker) tick() {
	now := w.now()
	for _, rt := range w.tasks {
		if rt.state == StateRunning {
			if err := rt.t.Punctuate(now); err != nil {
				w.failTask(rt, err)
			}
		}
	}
	w.advanceIdle()
	if err := w.commit(); err != nil {
		w.onCommitError(err)
	}
	w.backpressure()
	w.publishStatus()
}

func (w *Worker) shutdown() {
	if w.mustAbort {
		w.abort()
	} else if err := w.commit(); err != nil {
		w.log.Warn("last commit before shutdown failed; its work will be redone by the next owner", zap.Error(err))
		w.abort()
	}
	w.closeTasks()
	w.publishStatus()
	w.log.Info("worker stopped")
}

func (w *Worker) closeClients() {
	if w.consumer != nil {
		if err := w.consumer.Close(); err != nil {
			w.log.Warn("close consumer", zap.Error(err))
		}
	}
	if w.admin != nil {
		w.admin.Close()
	}
	if w.producer != nil {
		w.producer.Close()
	}
	if w.broker != nil {
		w.broker.Close()
	}
}

// pollBatch is the most events the pump takes from the consumer before it
// handles them.
const pollBatch = 64

// poll collects into w.polled the events the consumer has ready, up to
// pollBatch, waiting up to 10 ms for the first, and returns how many it
// collected. Handling them apart from polling keeps the code and data of
// each step in the processor's caches across a batch instead of swapping
// them out at every record: the gain is greater the larger the records.
// A rebalance callback running inside Poll handles the events collected
// before it first (handlePolled), as they belong to the assignment it ends.
func (w *Worker) poll() int {
	n := 0
	ev := w.pollConsumer(10)
	for ev != nil {
		w.polled = append(w.polled, ev)
		if n++; n == pollBatch {
			break
		}
		ev = w.pollConsumer(0)
	}
	return n
}

// handlePolled handles the collected events in order, then streams what
// they made the tasks emit.
func (w *Worker) handlePolled() {
	if len(w.polled) == 0 {
		return
	}
	for _, ev := range w.polled {
		if w.fatalErr != nil {
			break // the worker stops: what is left is read again by the next owner
		}
		w.handle(ev)
	}
	clear(w.polled)
	w.polled = w.polled[:0]
	if w.fatalErr == nil {
		w.stream()
	}
}

// touch puts the tasks rts on the list of tasks to stream outputs from.
func (w *Worker) touch(rts []*runningTask) {
	for _, rt := range rts {
		if !rt.touched {
			rt.touched = true
			w.touched = append(w.touched, rt)
		}
	}
}

// handle takes one consumer event.
func (w *Worker) handle(ev kafka.Event) {
	switch e := ev.(type) {
	case *kafka.Message:
		tp := e.TopicPartition
		ch := causal.Channel{Topic: *tp.Topic, Partition: tp.Partition}
		if tp.Error != nil {
			w.partitionError(ch, tp.Error)
			return
		}
		r := w.routeOf(ch)
		r.recordsIn.Inc()
		rec := framework.Record{Key: e.Key, Value: e.Value, Headers: w.headersIn(e.Headers), Timestamp: e.Timestamp,
			Topic: ch.Topic, Partition: ch.Partition, Offset: int64(tp.Offset)}
		w.touch(r.tasks)
		for _, rt := range r.tasks {
			if rt.state != StateRunning {
				continue
			}
			if err := rt.t.Receive(rec); err != nil {
				w.failTask(rt, err)
			}
		}
	case kafka.PartitionEOF:
		if e.Topic == nil || e.Offset < 0 {
			return
		}
		ch := causal.Channel{Topic: *e.Topic, Partition: e.Partition}
		w.touch(w.byChannel[ch])
		w.advance(ch, int64(e.Offset))
	case kafka.Error:
		if e.IsFatal() {
			w.fatalErr = fmt.Errorf("consumer: %w", e)
			return
		}
		w.log.Warn("consumer error", zap.Error(e), zap.Bool("retriable", e.IsRetriable()))
	}
}

func (w *Worker) advance(ch causal.Channel, position int64) {
	for _, rt := range w.byChannel[ch] {
		if rt.state != StateRunning {
			continue
		}
		if err := rt.t.Advance(ch.Topic, position); err != nil {
			w.failTask(rt, err)
		}
	}
}

func (w *Worker) partitionError(ch causal.Channel, err error) {
	if code := errorCode(err); code == kafka.ErrAutoOffsetReset || code == kafka.ErrOffsetOutOfRange {
		for _, rt := range w.byChannel[ch] {
			w.failTask(rt, fmt.Errorf("offset of %s out of range: records were lost before they were processed "+
				"(retention or truncation); restart with --allow-offset-reset to skip them: %w", ch, err))
		}
		return
	}
	w.log.Warn("partition error", zap.Stringer("channel", ch), zap.Error(err))
}

// advanceIdle reads the consumer's position for channels that a blocked
// head waits on and that hold nothing: a partition whose last offsets are
// transaction markers only moves this way.
func (w *Worker) advanceIdle() {
	waited := map[causal.Channel]bool{}
	for _, rt := range w.tasks {
		if rt.state != StateRunning {
			continue
		}
		for _, st := range rt.t.Status().Channels {
			if st.Blocked {
				waited[st.WaitingFor] = true
			}
		}
	}
	var tps []kafka.TopicPartition
	for ch := range waited {
		topic := ch.Topic
		tps = append(tps, kafka.TopicPartition{Topic: &topic, Partition: ch.Partition})
	}
	if len(tps) == 0 {
		return
	}
	pos, err := w.consumer.Position(tps)
	if err != nil {
		return
	}
	position := map[causal.Channel]int64{}
	for _, tp := range pos {
		if tp.Offset >= 0 {
			ch := causal.Channel{Topic: *tp.Topic, Partition: tp.Partition}
			position[ch] = int64(tp.Offset)
			w.advance(ch, int64(tp.Offset))
		}
	}
	w.checkUnsatisfiable(position)
}

// unsatisfiableAfter is how long a head must have waited before the worker
// asks the broker whether its claim can be met at all. It only decides
// when to look; nothing is ever delivered or advanced on a timer.
const unsatisfiableAfter = 3 * time.Second

// checkUnsatisfiable fails a task whose blocked head claims an offset that
// does not exist: the consumer has read its channel to the end and the
// claim lies beyond it. A real cause was appended before the record that
// claims it, so such a claim is a producer's mistake, and waiting would be
// silent forever.
func (w *Worker) checkUnsatisfiable(position map[causal.Channel]int64) {
	now := w.now()
	for _, rt := range w.tasks {
		if rt.state != StateRunning || rt.t == nil {
			continue
		}
		for ch, b := range rt.blocked {
			pos, ok := position[b.on]
			// At most one broker query per claim per unsatisfiableAfter.
			if !ok || now.Sub(b.since) < unsatisfiableAfter || now.Sub(b.checked) < unsatisfiableAfter {
				continue
			}
			b.checked = now
			rt.blocked[ch] = b
			_, high, err := w.consumer.QueryWatermarkOffsets(b.on.Topic, b.on.Partition, 5000)
			if err != nil || pos < high || b.off < high {
				continue
			}
			w.failTask(rt, fmt.Errorf("the head of %s claims %s up to offset %d, which can never be met: %s ends at offset %d "+
				"and the consumer has read it all; the producer of that record stamped an offset that does not exist", ch, b.on, b.off, b.on, high-1))
		}
	}
}

func (w *Worker) failTask(rt *runningTask, err error) {
	if rt.state == StateFailed {
		return
	}
	rt.state, rt.err = StateFailed, err
	if rt.t != nil && rt.t.Broken() && rt.streamed > 0 {
		w.mustAbort = true
	}
	fields := []zap.Field{zap.String("task", rt.id), zap.Error(err)}
	var ce *causal.ClockError
	if errors.As(err, &ce) {
		fields = append(fields, zap.Stringer("channel", ce.Channel), zap.Int64("offset", ce.Offset))
	}
	var de *framework.DeserializeError
	if errors.As(err, &de) {
		fields = append(fields, zap.String("channel", partitionString(de.Topic, de.Partition)), zap.Int64("offset", de.Offset))
	}
	w.log.Error("task failed; its offsets stay at the last commit (POST /tasks/"+rt.id+"/restart to retry)", fields...)
}

// rebalance is librdkafka's rebalance callback; it runs inside Poll, on
// the pump goroutine.
func (w *Worker) rebalance(c *kafka.Consumer, ev kafka.Event) error {
	w.handlePolled()
	switch e := ev.(type) {
	case kafka.AssignedPartitions:
		w.log.Info("partitions assigned", zap.Int("partitions", len(e.Partitions)))
		if err := w.assign(e.Partitions, nil); err != nil {
			if errors.Is(err, ErrStopped) {
				return nil // asked to stop while restoring: the run loop shuts down
			}
			w.fatalErr = err
			return err
		}
	case kafka.RevokedPartitions:
		w.log.Info("partitions revoked", zap.Int("partitions", len(e.Partitions)), zap.Bool("lost", c.AssignmentLost()))
		if !c.AssignmentLost() && !w.mustAbort {
			if err := w.commit(); err != nil {
				w.log.Warn("commit on revocation failed; the next owner redoes the work", zap.Error(err))
				w.abort()
			}
		} else {
			w.abort()
		}
		w.closeTasks()
		w.assigned = nil
		if err := c.Unassign(); err != nil {
			w.log.Warn("unassign", zap.Error(err))
		}
	}
	return nil
}

// assign builds the tasks of the assigned partitions from committed state
// and starts fetching where they resume.
func (w *Worker) assign(parts []kafka.TopicPartition, keepFailed map[string]error) error {
	have := map[causal.Channel]bool{}
	for _, tp := range parts {
		have[causal.Channel{Topic: *tp.Topic, Partition: tp.Partition}] = true
	}
	for _, pi := range w.topo.Processors() {
		for p := range w.counts[pi.Inputs[0]] {
			complete := true
			for _, in := range pi.Inputs {
				complete = complete && have[causal.Channel{Topic: in, Partition: p}]
			}
			if !complete {
				continue
			}
			w.tasks = append(w.tasks, &runningTask{id: task.ID(pi.Name, p), processor: pi.Name, partition: p,
				state: StateRestoring, committed: map[string]int64{}, blocked: map[causal.Channel]blockedSince{}})
		}
	}
	w.publishStatus()
	if err := w.build(w.tasks, keepFailed); err != nil {
		return err
	}
	start := map[causal.Channel]int64{}
	for _, rt := range w.tasks {
		for in, next := range rt.committed {
			ch := causal.Channel{Topic: in, Partition: rt.partition}
			if cur, ok := start[ch]; !ok || next < cur {
				start[ch] = next
			}
		}
	}
	assigned := make([]kafka.TopicPartition, 0, len(parts))
	for _, tp := range parts {
		ch := causal.Channel{Topic: *tp.Topic, Partition: tp.Partition}
		off, ok := start[ch]
		if !ok {
			w.log.Warn("partition assigned without a complete task; inputs may not be co-partitioned", zap.Stringer("channel", ch))
			continue
		}
		topic := ch.Topic
		assigned = append(assigned, kafka.TopicPartition{Topic: &topic, Partition: ch.Partition, Offset: kafka.Offset(off)})
	}
	w.assigned = assigned
	if err := w.consumer.Assign(assigned); err != nil {
		return fmt.Errorf("assign: %w", err)
	}
	// librdkafka keeps a partition's pause across Assign: resume what this
	// worker paused, and let backpressure decide again.
	var resume []kafka.TopicPartition
	for ch := range w.paused {
		topic := ch.Topic
		resume = append(resume, kafka.TopicPartition{Topic: &topic, Partition: ch.Partition})
	}
	if len(resume) > 0 {
		if err := w.consumer.Resume(resume); err != nil {
			w.log.Warn("resume after assign", zap.Error(err))
		}
	}
	w.paused = map[causal.Channel]bool{}
	w.publishStatus()
	return nil
}

// build restores the given tasks from the changelog and committed offsets,
// seeds and starts them, and indexes them by channel. Each task it builds
// replaces any previous instance. Tasks named in keepFailed are not run:
// they get their committed offsets and stay failed with the given error.
func (w *Worker) build(rts []*runningTask, keepFailed map[string]error) error {
	restored, err := w.readChangelog(rts)
	if err != nil {
		return err
	}
	var tps []kafka.TopicPartition
	for _, rt := range rts {
		pi, _ := w.topo.Processor(rt.processor)
		for _, in := range pi.Inputs {
			topic := in
			tps = append(tps, kafka.TopicPartition{Topic: &topic, Partition: rt.partition})
		}
	}
	committed, err := w.consumer.Committed(tps, 10000)
	if err != nil {
		return fmt.Errorf("read committed offsets: %w", err)
	}
	group := map[causal.Channel]int64{}
	for _, tp := range committed {
		if tp.Offset >= 0 {
			group[causal.Channel{Topic: *tp.Topic, Partition: tp.Partition}] = int64(tp.Offset)
		}
	}
	for _, rt := range rts {
		if prev, ok := keepFailed[rt.id]; ok {
			// Stays failed, but its committed offsets still hold the group's
			// offsets back.
			if err := w.seedOffsets(rt, restored[rt.id], group); err != nil {
				return err
			}
			rt.t, rt.state, rt.err = nil, StateFailed, prev
			continue
		}
		if err := w.buildOne(rt, restored[rt.id], group); err != nil {
			rt.t = nil
			w.failTask(rt, err)
		}
	}
	w.index()
	return nil
}

func (w *Worker) buildOne(rt *runningTask, r *restoredTask, group map[causal.Channel]int64) error {
	if rt.t != nil {
		if err := rt.t.Close(); err != nil {
			w.log.Warn("close task", zap.String("task", rt.id), zap.Error(err))
		}
	}
	t, err := task.New(task.Config{
		Topology: w.topo, Processor: rt.processor, Partition: rt.partition,
		OutputPartitions: w.partitionCount, GateOff: w.cfg.GateOff, Now: w.pumpClock,
		Observer: taskObserver{w: w, deliveries: w.metrics.Deliveries.WithLabelValues(rt.id)},
	})
	if err != nil {
		return err
	}
	rt.t, rt.state, rt.err = t, StateRestoring, nil
	rt.blocked = map[causal.Channel]blockedSince{}
	if r != nil {
		for name, changes := range r.stores {
			if err := t.RestoreStore(name, changes); err != nil {
				return err
			}
		}
		if r.checkpoint != nil {
			if err := t.RestoreGate(r.checkpoint.gate); err != nil {
				return err
			}
		}
	}
	if err := w.seedOffsets(rt, r, group); err != nil {
		return err
	}
	for in, next := range rt.committed {
		if err := t.Seed(in, next); err != nil {
			return err
		}
	}
	if err := t.Start(); err != nil {
		return err
	}
	rt.state = StateRunning
	return nil
}

// seedOffsets sets, for each input of rt, the offset it resumes from.
func (w *Worker) seedOffsets(rt *runningTask, r *restoredTask, group map[causal.Channel]int64) error {
	pi, _ := w.topo.Processor(rt.processor)
	for _, in := range pi.Inputs {
		next, err := w.startOffset(causal.Channel{Topic: in, Partition: rt.partition}, r, group)
		if err != nil {
			return err
		}
		rt.committed[in] = next
	}
	return nil
}

// startOffset is where a task resumes a channel: its own checkpointed
// position, else the group's committed offset, else where the reset policy
// starts. A committed position outside the log fails the task unless resets
// are allowed.
func (w *Worker) startOffset(ch causal.Channel, r *restoredTask, group map[causal.Channel]int64) (int64, error) {
	low, high, err := w.consumer.QueryWatermarkOffsets(ch.Topic, ch.Partition, 10000)
	if err != nil {
		return 0, fmt.Errorf("watermarks of %s: %w", ch, err)
	}
	next, known := int64(-1), false
	if r != nil && r.checkpoint != nil {
		next, known = r.checkpoint.next[ch.Topic]
	}
	if !known {
		next, known = group[ch]
	}
	if !known {
		if w.cfg.AutoOffsetReset == "latest" {
			return high, nil
		}
		return low, nil
	}
	if next < low || next > high {
		if !w.cfg.AllowOffsetReset {
			return 0, fmt.Errorf("committed offset %d of %s is outside the log [%d, %d]: records were lost before they were processed "+
				"(retention or truncation); restart with --allow-offset-reset to skip them", next, ch, low, high)
		}
		w.log.Warn("committed offset out of range; resetting as allowed", zap.Stringer("channel", ch), zap.Int64("offset", next))
		if next < low {
			return low, nil
		}
		return high, nil
	}
	return next, nil
}

func (w *Worker) index() {
	w.lastRoute = route{}
	w.byChannel = map[causal.Channel][]*runningTask{}
	for _, rt := range w.tasks {
		pi, _ := w.topo.Processor(rt.processor)
		for _, in := range pi.Inputs {
			ch := causal.Channel{Topic: in, Partition: rt.partition}
			w.byChannel[ch] = append(w.byChannel[ch], rt)
		}
	}
}

func (w *Worker) closeTasks() {
	for _, rt := range w.tasks {
		if rt.t != nil {
			if err := rt.t.Close(); err != nil {
				w.log.Warn("close task", zap.String("task", rt.id), zap.Error(err))
			}
		}
		w.metrics.TaskState.DeletePartialMatch(map[string]string{"task": rt.id})
		w.metrics.Held.DeletePartialMatch(map[string]string{"task": rt.id})
	}
	w.tasks = nil
	w.lastRoute = route{}
	w.byChannel = map[causal.Channel][]*runningTask{}
}

// pumpClock is the tasks' clock: the time of the pump's last poll, which
// trails the wall clock by at most the handling of one poll batch.
func (w *Worker) pumpClock() time.Time { return w.pumpTime }

func (w *Worker) partitionCount(topic string) (int32, error) {
	n, ok := w.counts[topic]
	if !ok {
		return 0, fmt.Errorf("unknown topic %q", topic)
	}
	return n, nil
}

// pendingCommit is one task's share of a transaction.
type pendingCommit struct {
	rt   *runningTask
	snap task.Snapshot
}

// begin opens a transaction if none is open.
func (w *Worker) begin() error {
	if w.inTxn {
		return nil
	}
	if err := w.producer.BeginTransaction(); err != nil {
		return fmt.Errorf("begin transaction: %w", err)
	}
	w.inTxn = true
	return nil
}

// stream produces what the tasks the last poll batch went to have emitted
// into the open transaction, so that sending overlaps processing and a
// commit only waits for the tail. (Outputs of punctuations and idle
// advances wait for the commit.)
func (w *Worker) stream() {
	touched := w.touched
	for _, rt := range touched {
		rt.touched = false
	}
	w.streamFrom(touched)
	clear(touched)
	w.touched = touched[:0]
}

// streamFrom produces the outputs of the running tasks among touched.
func (w *Worker) streamFrom(touched []*runningTask) {
	for _, rt := range touched {
		if rt.state != StateRunning || rt.t == nil {
			continue
		}
		outs := rt.t.TakeOutputs()
		if len(outs) == 0 {
			continue
		}
		if err := w.begin(); err != nil {
			w.onCommitError(err)
			return
		}
		for _, o := range outs {
			if err := w.produceOutput(o); err != nil {
				w.onCommitError(err)
				return
			}
		}
		rt.streamed += len(outs)
	}
}

// outTopic is the worker's state for one output topic.
type outTopic struct {
	// name is the topic's name; kafka.Message points at it rather than at a
	// new string per record.
	name string
	// produced counts the outputs in the open transaction.
	produced int
}

func (w *Worker) produceOutput(o task.Output) error {
	ot := w.lastOut
	if ot == nil || ot.name != o.Topic {
		var ok bool
		if ot, ok = w.outTopics[o.Topic]; !ok {
			ot = &outTopic{name: o.Topic}
			w.outTopics[o.Topic] = ot
		}
		w.lastOut = ot
	}
	w.outHeaders = w.outHeaders[:0]
	for _, h := range o.Record.Headers {
		w.outHeaders = append(w.outHeaders, kafka.Header{Key: h.Key, Value: h.Value})
	}
	w.out = kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &ot.name, Partition: o.Partition},
		Key: o.Record.Key, Value: o.Record.Value, Headers: w.outHeaders, Timestamp: o.Record.Timestamp}
	err := w.produce(&w.out)
	w.out = kafka.Message{}
	clear(w.outHeaders)
	if err != nil {
		return err
	}
	ot.produced++
	return nil
}

// route is what a message's channel leads to: the tasks that read it and
// its topic's input counter.
type route struct {
	ch        causal.Channel
	tasks     []*runningTask
	recordsIn prometheus.Counter // nil in the zero route, which leads nowhere
}

// routeOf returns the route of ch, from the last message's when it came
// from the same channel.
func (w *Worker) routeOf(ch causal.Channel) route {
	if w.lastRoute.recordsIn != nil && w.lastRoute.ch == ch {
		return w.lastRoute
	}
	c, ok := w.recordsIn[ch.Topic]
	if !ok {
		c = w.metrics.RecordsIn.WithLabelValues(ch.Topic)
		w.recordsIn[ch.Topic] = c
	}
	w.lastRoute = route{ch: ch, tasks: w.byChannel[ch], recordsIn: c}
	return w.lastRoute
}

// headerSlabLen is how many headers one slab of received headers holds.
const headerSlabLen = 1024

// headersIn converts a received message's headers, carving the list from
// the header slab. Carved lists are never written again, so records that a
// gate holds keep theirs.
func (w *Worker) headersIn(hs []kafka.Header) []framework.Header {
	if len(hs) == 0 {
		return nil
	}
	if cap(w.headerSlab)-len(w.headerSlab) < len(hs) {
		w.headerSlab = make([]framework.Header, 0, max(headerSlabLen, len(hs)))
	}
	at := len(w.headerSlab)
	for _, h := range hs {
		w.headerSlab = append(w.headerSlab, framework.Header{Key: h.Key, Value: h.Value})
	}
	return w.headerSlab[at : at+len(hs) : at+len(hs)]
}

// commit closes the open transaction with every task's remaining outputs,
// store changes, checkpoint and offsets. A task that failed while
// processing contributes nothing, and its committed offsets stay where they
// were; if it had already streamed outputs, the transaction is aborted
// instead and the healthy tasks redo their work from committed state.
func (w *Worker) commit() error {
	if len(w.tasks) == 0 || w.consumer == nil {
		return nil
	}
	if w.mustAbort {
		w.log.Warn("a task failed after its outputs were sent: aborting the transaction; the other tasks redo their work")
		w.abort()
		w.rebuildAll(true)
		return nil
	}
	var work []pendingCommit
	dirty := w.inTxn
	for _, rt := range w.tasks {
		if rt.t == nil || rt.state == StateRestoring {
			continue
		}
		// A failed task still commits what came before its failure when its
		// snapshot says that is well defined (a record refused at receipt).
		snap, err := rt.t.Snapshot()
		if err != nil {
			rt.t.TakeOutputs()
			continue
		}
		if len(snap.Changes) > 0 {
			dirty = true
		}
		for _, e := range snap.Offsets {
			if rt.committed[e.Channel.Topic] != e.Offset {
				dirty = true
			}
		}
		work = append(work, pendingCommit{rt: rt, snap: snap})
	}
	if !dirty {
		return nil
	}
	closing := w.now()
	if err := w.begin(); err != nil {
		return err
	}
	cl := changelogTopic(w.cfg.ApplicationID)
	for _, p := range work {
		for _, o := range p.rt.t.TakeOutputs() {
			if err := w.produceOutput(o); err != nil {
				return err
			}
		}
		for name, changes := range p.snap.Changes {
			for _, c := range changes {
				msg := &kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &cl, Partition: p.rt.partition},
					Key: storeKey(p.rt.processor, p.rt.partition, name, c.Key), Value: c.Value}
				if err := w.produce(msg); err != nil {
					return err
				}
			}
		}
		next := map[string]int64{}
		for _, e := range p.snap.Offsets {
			next[e.Channel.Topic] = e.Offset
		}
		msg := &kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &cl, Partition: p.rt.partition},
			Key: checkpointKey(p.rt.processor, p.rt.partition), Value: taskCheckpoint{next: next, gate: p.snap.Checkpoint}.encode()}
		if err := w.produce(msg); err != nil {
			return err
		}
	}
	offsets := w.groupOffsets(work)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	md, err := w.consumer.GetConsumerGroupMetadata()
	if err != nil {
		return fmt.Errorf("group metadata: %w", err)
	}
	if len(offsets) > 0 {
		if err := w.producer.SendOffsetsToTransaction(ctx, offsets, md); err != nil {
			return fmt.Errorf("send offsets: %w", err)
		}
	}
	if err := w.commitTransaction(ctx); err != nil {
		return err
	}
	w.inTxn = false
	w.failedCommits = 0
	for _, p := range work {
		for _, e := range p.snap.Offsets {
			p.rt.committed[e.Channel.Topic] = e.Offset
		}
	}
	for _, rt := range w.tasks {
		rt.streamed = 0
	}
	for _, ot := range w.outTopics {
		if ot.produced > 0 {
			w.metrics.RecordsOut.WithLabelValues(ot.name).Add(float64(ot.produced))
			ot.produced = 0
		}
	}
	w.metrics.Commits.Inc()
	w.metrics.CommitSeconds.Observe(w.now().Sub(closing).Seconds())
	return nil
}

// groupOffsets is, per assigned channel, the smallest next offset of any
// task reading it: a channel shared by several processors resumes where the
// furthest-behind one must, and the others drop the replay.
func (w *Worker) groupOffsets(work []pendingCommit) []kafka.TopicPartition {
	fresh := map[*runningTask]map[string]int64{}
	for _, p := range work {
		m := map[string]int64{}
		for _, e := range p.snap.Offsets {
			m[e.Channel.Topic] = e.Offset
		}
		fresh[p.rt] = m
	}
	low := map[causal.Channel]int64{}
	for _, rt := range w.tasks {
		src := rt.committed
		if m, ok := fresh[rt]; ok {
			src = m
		}
		for in, next := range src {
			ch := causal.Channel{Topic: in, Partition: rt.partition}
			if cur, ok := low[ch]; !ok || next < cur {
				low[ch] = next
			}
		}
	}
	out := make([]kafka.TopicPartition, 0, len(low))
	for ch, off := range low {
		topic := ch.Topic
		out = append(out, kafka.TopicPartition{Topic: &topic, Partition: ch.Partition, Offset: kafka.Offset(off)})
	}
	return out
}

// produce queues one message, waiting for room when the local queue is
// full.
func (w *Worker) produce(msg *kafka.Message) error {
	for {
		err := w.producer.Produce(msg, nil)
		if err == nil {
			return nil
		}
		if errorCode(err) == kafka.ErrQueueFull {
			w.producer.Flush(100)
			continue
		}
		return fmt.Errorf("produce to %s: %w", partitionString(*msg.TopicPartition.Topic, msg.TopicPartition.Partition), err)
	}
}

func (w *Worker) commitTransaction(ctx context.Context) error {
	backoff := 50 * time.Millisecond
	for attempt := 1; ; attempt++ {
		err := w.producer.CommitTransaction(ctx)
		if err == nil {
			return nil
		}
		_, retriable, abortable := kafkaErr(err)
		if !retriable || abortable || attempt == 5 {
			return fmt.Errorf("commit transaction: %w", err)
		}
		w.log.Warn("commit failed, retrying", zap.Int("attempt", attempt), zap.Error(err))
		time.Sleep(backoff)
		backoff *= 2
	}
}

// onCommitError aborts and rebuilds every task from committed state, or
// stops the worker when the error is fatal (a fenced producer).
func (w *Worker) onCommitError(err error) {
	fatal, _, _ := kafkaErr(err)
	if fatal || fenced(err) || w.producer.GetFatalError() != nil {
		w.fatalErr = fmt.Errorf("producer fenced or failed: %w (another worker with instance id %q may have taken over)", err, w.instanceID)
		return
	}
	w.failedCommits++
	w.log.Warn("transaction failed; aborting and rebuilding tasks from committed state",
		zap.Error(err), zap.Int("consecutive_failures", w.failedCommits))
	w.abort()
	// Back off on repeated failures so a persistent fault does not spin.
	if w.failedCommits > 1 {
		select {
		case <-time.After(min(time.Duration(1<<min(w.failedCommits, 6))*50*time.Millisecond, 5*time.Second)):
		case <-w.stop:
		}
	}
	w.rebuildAll(true)
}

// fenced reports whether err says another producer took over the
// transactional id: the one error a worker must never retry.
func fenced(err error) bool {
	switch errorCode(err) {
	case kafka.ErrFenced, kafka.ErrProducerFenced, kafka.ErrInvalidProducerEpoch:
		return true
	}
	return false
}

func (w *Worker) abort() {
	w.mustAbort = false
	if !w.inTxn {
		return
	}
	w.inTxn = false
	for _, ot := range w.outTopics {
		ot.produced = 0
	}
	for _, rt := range w.tasks {
		rt.streamed = 0
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := w.producer.AbortTransaction(ctx); err != nil {
		if fatal, _, _ := kafkaErr(err); fatal {
			w.fatalErr = fmt.Errorf("abort transaction: %w", err)
			return
		}
		if errorCode(err) != kafka.ErrState {
			w.log.Warn("abort transaction", zap.Error(err))
		}
		return
	}
	w.metrics.Aborts.Inc()
}

// rebuildAll throws every task away and builds it again from what was
// committed, then rewinds the consumer to match. Never patch in memory.
// With keepFailed, tasks that have failed stay failed and are not run
// again: a record that fails its processor every time would otherwise fail,
// abort and rebuild forever. Only an explicit restart rebuilds them.
func (w *Worker) rebuildAll(keepFailed bool) {
	parts := w.assigned
	failed := map[string]error{}
	if keepFailed {
		for _, rt := range w.tasks {
			if rt.state == StateFailed {
				failed[rt.id] = rt.err
			}
		}
	}
	w.closeTasks()
	if len(parts) == 0 {
		return
	}
	if err := w.assign(parts, failed); err != nil && !errors.Is(err, ErrStopped) {
		w.fatalErr = err
	}
}

// restart commits what healthy tasks have done, then rebuilds every task
// from committed state: the failed one gets a fresh start at its committed
// offsets, and the consumer rewinds for it.
func (w *Worker) restart(id string) error {
	found := false
	for _, rt := range w.tasks {
		found = found || rt.id == id
	}
	if !found {
		return fmt.Errorf("%w: %q", ErrNoTask, id)
	}
	if err := w.commit(); err != nil {
		w.onCommitError(err)
		return err
	}
	w.log.Info("restarting task from its committed state", zap.String("task", id))
	w.rebuildAll(false)
	return w.fatalErr
}

// backpressure pauses a partition whose hold queue, in some task, is over
// its bound, and resumes it once every queue is under half. A partition
// only failed tasks read is paused too. Empty queues are never the reason
// for a pause.
func (w *Worker) backpressure() {
	var pause, resume []kafka.TopicPartition
	for ch, rts := range w.byChannel {
		held, running := 0, false
		for _, rt := range rts {
			if rt.state != StateRunning {
				continue
			}
			running = true
			for _, st := range rt.t.Status().Channels {
				if st.Channel == ch {
					held = max(held, st.Held)
				}
			}
		}
		topic := ch.Topic
		tp := kafka.TopicPartition{Topic: &topic, Partition: ch.Partition}
		over := !running || held > w.cfg.MaxHeldPerChannel
		switch {
		case over && !w.paused[ch]:
			pause = append(pause, tp)
			w.paused[ch] = true
		case !over && w.paused[ch] && held <= w.cfg.MaxHeldPerChannel/2:
			resume = append(resume, tp)
			delete(w.paused, ch)
		}
	}
	if len(pause) > 0 {
		if err := w.consumer.Pause(pause); err != nil {
			w.log.Warn("pause", zap.Error(err))
		}
	}
	if len(resume) > 0 {
		if err := w.consumer.Resume(resume); err != nil {
			w.log.Warn("resume", zap.Error(err))
		}
	}
}

// taskObserver turns one task's events into logs and metrics.
type taskObserver struct {
	w          *Worker
	deliveries prometheus.Counter // of this task
}

func (o taskObserver) Dropped(id string, ev framework.DropEvent) {
	o.w.metrics.Dropped.WithLabelValues(id, ev.Reason).Inc()
	o.w.log.Warn("record dropped", zap.String("task", id), zap.String("reason", ev.Reason),
		zap.String("channel", partitionString(ev.Record.Topic, ev.Record.Partition)), zap.Int64("offset", ev.Record.Offset),
		zap.String("detail", ev.Detail))
}

// Delivered counts every delivery and times those that waited: a record
// delivered in the poll that brought it has waited 0 by the pump's clock,
// and observing it would cost more than the rest of its bookkeeping.
func (o taskObserver) Delivered(id string, waited time.Duration) {
	o.deliveries.Inc()
	if waited > 0 {
		o.w.metrics.GateWait.Observe(waited.Seconds())
	}
}

// restoredTask is what the changelog holds for one task.
type restoredTask struct {
	checkpoint *taskCheckpoint
	stores     map[string][]store.Change
}

// readChangelog reads the changelog partitions of the given tasks to their
// end (under read_committed) and returns each task's last checkpoint and
// store changes. It logs progress on long restores.
func (w *Worker) readChangelog(rts []*runningTask) (map[string]*restoredTask, error) {
	out := map[string]*restoredTask{}
	if len(rts) == 0 {
		return out, nil
	}
	want := map[string]bool{}
	parts := map[int32]bool{}
	for _, rt := range rts {
		want[rt.id] = true
		parts[rt.partition] = true
	}
	rc, err := kafka.NewConsumer(ptr(w.restoreConsumerConfig()))
	if err != nil {
		return nil, fmt.Errorf("restore consumer: %w", err)
	}
	defer func() {
		if err := rc.Close(); err != nil {
			w.log.Warn("close restore consumer", zap.Error(err))
		}
	}()
	cl := changelogTopic(w.cfg.ApplicationID)
	var tps []kafka.TopicPartition
	total := int64(0)
	pending := map[int32]bool{}
	for p := range parts {
		low, high, err := rc.QueryWatermarkOffsets(cl, p, 10000)
		if err != nil {
			return nil, fmt.Errorf("changelog watermarks of %s: %w", partitionString(cl, p), err)
		}
		if high <= low {
			continue
		}
		total += high - low
		pending[p] = true
		tps = append(tps, kafka.TopicPartition{Topic: &cl, Partition: p, Offset: kafka.OffsetBeginning})
	}
	if len(tps) == 0 {
		return out, nil
	}
	if err := rc.Assign(tps); err != nil {
		return nil, fmt.Errorf("assign changelog: %w", err)
	}
	started, lastLog := w.now(), w.now()
	read := int64(0)
	for len(pending) > 0 {
		select {
		case <-w.stop:
			return nil, ErrStopped
		default:
		}
		switch e := rc.Poll(100).(type) {
		case *kafka.Message:
			if e.TopicPartition.Error != nil {
				return nil, fmt.Errorf("read changelog: %w", e.TopicPartition.Error)
			}
			read++
			k, err := parseChangelogKey(e.Key)
			if err != nil {
				return nil, fmt.Errorf("changelog %s@%d: %w", partitionString(cl, e.TopicPartition.Partition), e.TopicPartition.Offset, err)
			}
			id := task.ID(k.processor, k.partition)
			if !want[id] {
				continue
			}
			r := out[id]
			if r == nil {
				r = &restoredTask{stores: map[string][]store.Change{}}
				out[id] = r
			}
			switch k.kind {
			case kindCheckpoint:
				cp, err := decodeTaskCheckpoint(e.Value)
				if err != nil {
					return nil, fmt.Errorf("checkpoint of %s: %w", id, err)
				}
				r.checkpoint = &cp
			case kindStore:
				r.stores[k.store] = append(r.stores[k.store], store.Change{Key: k.key, Value: e.Value})
			}
			w.metrics.RestoreRecords.WithLabelValues(id).Inc()
		case kafka.PartitionEOF:
			delete(pending, e.Partition)
		case kafka.Error:
			if e.IsFatal() {
				return nil, fmt.Errorf("read changelog: %w", e)
			}
		}
		if w.now().Sub(lastLog) > 2*time.Second {
			lastLog = w.now()
			w.log.Info("restoring from changelog", zap.Int64("read", read), zap.Int64("of", total), zap.Duration("elapsed", w.now().Sub(started)))
		}
		for _, rt := range rts {
			w.metrics.RestoreProgress.WithLabelValues(rt.id).Set(float64(read) / float64(total))
		}
	}
	for _, rt := range rts {
		w.metrics.RestoreProgress.WithLabelValues(rt.id).Set(1)
	}
	if read > 0 {
		w.log.Info("restored from changelog", zap.Int64("records", read), zap.Duration("took", w.now().Sub(started)))
	}
	return out, nil
}

// lower-case zap field helpers used across the package.
func fieldTopic(t string) zap.Field     { return zap.String("topic", t) }
func fieldPartitions(n int32) zap.Field { return zap.Int32("partitions", n) }

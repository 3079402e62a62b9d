package txn_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/runtime/internal/transport"
	"github.com/causeway-stream/causeway/runtime/internal/txn"
)

// client is a transactional client that keeps what it is asked: the
// records of the open transaction, those committed, and the calls, and
// fails the calls it is told to.
type client struct {
	open      bool
	pending   []transport.Message
	committed []transport.Message
	calls     []string
	// commitErrs fail the next commits, in turn; abortErr every abort.
	commitErrs []error
	abortErr   error
	flushErr   error
	flushHangs bool
	fatal      error
	// refuse is what the broker refuses, by key, once watched.
	refuse  map[string]error
	watched bool
	refused []transport.RefusedRecord
}

func (c *client) InitTransactions(context.Context) error {
	c.calls = append(c.calls, "init")
	return nil
}

func (c *client) BeginTransaction() error {
	if c.open {
		return errors.New("a transaction is open already")
	}
	c.calls = append(c.calls, "begin")
	c.open = true
	return nil
}

func (c *client) Produce(m *transport.Message) error {
	if !c.open {
		return errors.New("no transaction open")
	}
	if err, ok := c.refuse[string(m.Key)]; ok && c.watched {
		c.refused = append(c.refused, transport.RefusedRecord{Msg: *m, Err: err})
	}
	c.pending = append(c.pending, *m)
	return nil
}

func (c *client) Flush(ctx context.Context) error {
	c.calls = append(c.calls, "flush")
	if c.flushHangs {
		<-ctx.Done() // a broker that never answers
		return ctx.Err()
	}
	return c.flushErr
}

func (c *client) SendOffsetsToTransaction(context.Context, map[causal.Channel]int64, transport.GroupMetadata) error {
	c.calls = append(c.calls, "offsets")
	return nil
}

func (c *client) CommitTransaction(context.Context) error {
	c.calls = append(c.calls, "commit")
	if len(c.commitErrs) > 0 {
		err := c.commitErrs[0]
		c.commitErrs = c.commitErrs[1:]
		return err
	}
	for _, m := range c.pending {
		if _, ok := c.refuse[string(m.Key)]; ok {
			return &transport.ClientError{Class: transport.ClassAbortable, Err: errors.New("a record was refused")}
		}
	}
	c.committed = append(c.committed, c.pending...)
	c.pending, c.open = nil, false
	return nil
}

func (c *client) AbortTransaction(context.Context) error {
	c.calls = append(c.calls, "abort")
	c.pending, c.open = nil, false
	return c.abortErr
}

func (c *client) FatalError() error { return c.fatal }
func (c *client) Released() bool    { return true }
func (c *client) Watch()            { c.watched = true }
func (c *client) Unwatch()          { c.watched = false }
func (c *client) Close() error      { return nil }

func (c *client) Refused() []transport.RefusedRecord {
	out := c.refused
	c.refused = nil
	return out
}

func msg(topic, key string) *transport.Message {
	return &transport.Message{Topic: topic, Key: []byte(key), Value: []byte("v")}
}

func retriable() error {
	return &transport.ClientError{Class: transport.ClassRetriable, Err: errors.New("coordinator moved")}
}

func TestDoEndsEveryTransactionItBegins(t *testing.T) {
	writeErr := errors.New("the write failed")
	tests := []struct {
		name       string
		write      func(send func(*transport.Message) error) error
		commitErrs []error
		wantErr    error
		// wantClass is the class of the error, when there is one
		// without a sentinel to match.
		wantClass transport.Class
		committed int
		calls     []string
		perTopic  map[string]int
	}{
		{
			name: "a write that succeeds commits what it sent",
			write: func(send func(*transport.Message) error) error {
				return errors.Join(send(msg("a", "1")), send(msg("b", "2")), send(msg("a", "3")))
			},
			committed: 3, calls: []string{"begin", "commit"}, perTopic: map[string]int{"a": 2, "b": 1},
		},
		{
			name: "a write that fails aborts",
			write: func(send func(*transport.Message) error) error {
				_ = send(msg("a", "1"))
				return writeErr
			},
			wantErr: writeErr, calls: []string{"begin", "abort"}, perTopic: map[string]int{},
		},
		{
			name:       "a retriable commit failure is tried again",
			write:      func(send func(*transport.Message) error) error { return send(msg("a", "1")) },
			commitErrs: []error{retriable(), retriable()},
			committed:  1, calls: []string{"begin", "commit", "commit", "commit"}, perTopic: map[string]int{"a": 1},
		},
		{
			name:       "a commit that keeps failing aborts",
			write:      func(send func(*transport.Message) error) error { return send(msg("a", "1")) },
			commitErrs: []error{retriable(), retriable(), retriable()},
			wantClass:  transport.ClassRetriable,
			calls:      []string{"begin", "commit", "commit", "commit", "abort"}, perTopic: map[string]int{},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := &client{commitErrs: tt.commitErrs}
			perTopic := map[string]int{}
			p := txn.New(c, txn.Options{CommitAttempts: 3,
				OnCommitted: func(topic string, n int) { perTopic[topic] += n }})
			err := p.Do(tt.write)
			switch {
			case tt.wantClass != 0:
				require.Error(t, err)
				assert.Equal(t, tt.wantClass, transport.Classify(err))
			case tt.wantErr != nil:
				require.ErrorIs(t, err, tt.wantErr)
			default:
				require.NoError(t, err)
			}
			assert.Len(t, c.committed, tt.committed)
			assert.Equal(t, tt.calls, c.calls)
			assert.Equal(t, tt.perTopic, perTopic)
			assert.False(t, p.Open(), "no transaction is left open")
			assert.False(t, c.open)
		})
	}
}

// A flush that fails inside Do fails the write: the transaction is
// aborted, and nothing of it committed.
func TestAFailedFlushAbortsItsTransaction(t *testing.T) {
	flushErr := errors.New("the broker is gone")
	c := &client{flushErr: flushErr}
	p := txn.New(c, txn.Options{})
	err := p.Do(func(send func(*transport.Message) error) error {
		if err := send(msg("a", "1")); err != nil {
			return err
		}
		return p.Flush(context.Background())
	})
	require.ErrorIs(t, err, flushErr)
	assert.Equal(t, []string{"begin", "flush", "abort"}, c.calls)
	assert.Empty(t, c.committed)
}

// A flush that gets no answer gives up after CommitTimeout, as a commit
// does, though the caller's context has no deadline.
func TestAFlushIsBoundedByTheCommitTimeout(t *testing.T) {
	p := txn.New(&client{flushHangs: true}, txn.Options{CommitTimeout: 50 * time.Millisecond})
	done := make(chan error, 1)
	go func() { done <- p.Flush(context.Background()) }()
	select {
	case err := <-done:
		require.ErrorIs(t, err, context.DeadlineExceeded)
	case <-time.After(10 * time.Second):
		t.Fatal("the flush did not give up")
	}
}

// After a transaction fails on a record the broker refuses, that record
// is known: sent again, its error comes back at once, and the rest of
// the next transaction commits.
func TestARefusedRecordIsKnownWhenSentAgain(t *testing.T) {
	tooLarge := &transport.ClientError{Class: transport.ClassRecord, Kind: transport.KindTooLarge, Err: errors.New("too large")}
	c := &client{refuse: map[string]error{"big": tooLarge}}
	p := txn.New(c, txn.Options{})
	write := func(send func(*transport.Message) error) error {
		if err := send(msg("a", "small")); err != nil {
			return err
		}
		if err := send(msg("a", "big")); err != nil {
			assert.True(t, transport.TooLarge(err))
		}
		return nil
	}
	// Unwatched, the first failure shows no refusals, but starts watching.
	require.Error(t, p.Do(write))
	require.Error(t, p.Do(write), "watched: this failure learns the refusal")
	require.NoError(t, p.Do(write), "the refused record is not sent again")
	require.Len(t, c.committed, 1)
	assert.Equal(t, "small", string(c.committed[0].Key))
	assert.False(t, c.watched, "a commit ends the watching")

	// A commit without it, as when its sender is slow to send it again,
	// does not forget it; many commits later it is forgotten, and sent to
	// the broker again.
	small := func(send func(*transport.Message) error) error { return send(msg("a", "small")) }
	require.NoError(t, p.Do(small))
	require.NoError(t, p.Do(write), "still known after a commit without it")
	for range 64 {
		require.NoError(t, p.Do(small))
	}
	require.Error(t, p.Do(write), "forgotten: the broker is asked again")
}

// An abort that fails fatally is the caller's to act on; another is only
// logged.
func TestAbortReportsOnlyFatalErrors(t *testing.T) {
	for _, tt := range []struct {
		class transport.Class
		fails bool
	}{{transport.ClassFatal, true}, {transport.ClassAbortable, false}, {transport.ClassRetriable, false}} {
		t.Run(tt.class.String(), func(t *testing.T) {
			c := &client{abortErr: &transport.ClientError{Class: tt.class, Err: errors.New("abort failed")}}
			p := txn.New(c, txn.Options{})
			require.NoError(t, p.Send(msg("a", "1")))
			err := p.Abort()
			assert.Equal(t, tt.fails, err != nil, "abort error: %v", err)
			assert.Equal(t, tt.fails, p.Fatal(err))
		})
	}
}

// Commit sends the consumer's offsets into the transaction before it
// commits, and opens one when none is, so that offsets alone commit.
func TestCommitSendsOffsetsFirst(t *testing.T) {
	c := &client{}
	p := txn.New(c, txn.Options{})
	require.NoError(t, p.Commit(map[causal.Channel]int64{{Topic: "in"}: 4}, nil))
	assert.Equal(t, []string{"begin", "offsets", "commit"}, c.calls)
}

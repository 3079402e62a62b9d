package main

import (
	"context"
	"fmt"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/causeway-stream/causeway/causal"
)

// Client is a shop front end. For each order it writes the order, then its
// payment, then a shipment or cancellation request, to three topics. Its
// causal session stamps every record with what the client wrote before, so
// the gate delivers them in that order wherever they are read, however far
// behind a topic lags.
type Client struct {
	cl      *kgo.Client
	session causal.Session
}

// NewClient connects a client to the brokers.
func NewClient(bootstrap string) (*Client, error) {
	// franz-go's default partitioner hashes keys with murmur2, as the Java
	// client does and Causeway too: records with one key land on the same
	// partition index in every topic, which co-partitioned processors rely
	// on.
	cl, err := kgo.NewClient(kgo.SeedBrokers(bootstrap), kgo.ProducerLinger(time.Millisecond))
	if err != nil {
		return nil, err
	}
	return &Client{cl: cl}, nil
}

// Close flushes and closes the producer.
func (c *Client) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = c.cl.Flush(ctx) // Write waits for each record: nothing is left
	c.cl.Close()
}

// Write sends one record, stamped with the session's clock, and adds its
// offset to the session once the broker has acknowledged it.
func (c *Client) Write(ctx context.Context, topic, key, value string) error {
	r := &kgo.Record{Topic: topic, Key: []byte(key), Value: []byte(value)}
	if !c.session.Clock().IsEmpty() {
		r.Headers = []kgo.RecordHeader{{Key: causal.HeaderKey, Value: c.session.AppendHeader(nil)}}
	}
	if err := c.cl.ProduceSync(ctx, r).FirstErr(); err != nil {
		return fmt.Errorf("write %s: %w", topic, err)
	}
	c.session.Produced(causal.Channel{Topic: topic, Partition: r.Partition}, r.Offset)
	return nil
}

// Shop writes n orders with their payments and requests; every fifth order
// is cancelled instead of shipped. It returns what it wrote.
func (c *Client) Shop(ctx context.Context, n int) (Written, error) {
	var w Written
	for i := range n {
		order := fmt.Sprintf("order-%04d", i)
		req := "ship"
		if i%5 == 4 {
			req = "cancel"
		}
		steps := [][3]string{
			{OrdersTopic, order, "created " + order},
			{PaymentsTopic, order, "pay-" + order},
			{RequestsTopic, order, req + " req-" + order},
		}
		for _, s := range steps {
			if err := c.Write(ctx, s[0], s[1], s[2]); err != nil {
				return w, err
			}
		}
		w.Orders = append(w.Orders, order)
	}
	return w, nil
}

// Written is what the client wrote.
type Written struct {
	Orders []string
}

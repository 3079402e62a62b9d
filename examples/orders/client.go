package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/confluentinc/confluent-kafka-go/v2/kafka"

	"github.com/causeway-stream/causeway/causal"
)

// Client is a shop front end. For each order it writes the order, then its
// payment, then a shipment or cancellation request, to three topics. Its
// causal session stamps every record with what the client wrote before, so
// the gate delivers them in that order wherever they are read, however far
// behind a topic lags.
type Client struct {
	p       *kafka.Producer
	session causal.Session
}

// NewClient connects a client to the brokers.
func NewClient(bootstrap string) (*Client, error) {
	// murmur2_random is the Java client's partitioner, which Causeway uses
	// too: records with one key land on the same partition index in every
	// topic, which co-partitioned processors rely on.
	p, err := kafka.NewProducer(&kafka.ConfigMap{"bootstrap.servers": bootstrap, "enable.idempotence": true,
		"linger.ms": 1, "partitioner": "murmur2_random", "enable.metrics.push": false})
	if err != nil {
		return nil, err
	}
	return &Client{p: p}, nil
}

// Close flushes and closes the producer.
func (c *Client) Close() {
	c.p.Flush(10_000)
	c.p.Close()
}

// Write sends one record, stamped with the session's clock, and adds its
// offset to the session once the broker has acknowledged it.
func (c *Client) Write(ctx context.Context, topic, key, value string) error {
	msg := &kafka.Message{TopicPartition: kafka.TopicPartition{Topic: &topic, Partition: kafka.PartitionAny},
		Key: []byte(key), Value: []byte(value)}
	if !c.session.Clock().IsEmpty() {
		msg.Headers = []kafka.Header{{Key: causal.HeaderKey, Value: c.session.AppendHeader(nil)}}
	}
	dr := make(chan kafka.Event, 1)
	if err := c.p.Produce(msg, dr); err != nil {
		return fmt.Errorf("write %s: %w", topic, err)
	}
	select {
	case ev := <-dr:
		m, ok := ev.(*kafka.Message)
		if !ok {
			return fmt.Errorf("write %s: unexpected event %v", topic, ev)
		}
		if m.TopicPartition.Error != nil {
			return fmt.Errorf("write %s: %w", topic, m.TopicPartition.Error)
		}
		c.session.Produced(causal.Channel{Topic: topic, Partition: m.TopicPartition.Partition}, int64(m.TopicPartition.Offset))
		return nil
	case <-ctx.Done():
		return errors.Join(fmt.Errorf("write %s", topic), ctx.Err())
	}
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

package postgres

import (
	"context"
	"fmt"

	"github.com/causeway-stream/causeway/causal"
	"github.com/causeway-stream/causeway/connect"
)

var _ connect.PositionsEditor = (*task)(nil)

// SetPositions sets the connector's positions, in one transaction; a
// negative one deletes the channel's row.
func (t *task) SetPositions(ctx context.Context, positions map[causal.Channel]int64) error {
	tx, err := t.pool.Begin(ctx)
	if err != nil {
		return transient(err)
	}
	defer tx.Rollback(ctx) //nolint:errcheck // after Commit it does nothing
	pos := t.s.positions.Sanitize()
	for ch, next := range positions {
		if next < 0 {
			_, err = tx.Exec(ctx, `DELETE FROM `+pos+` WHERE connector = $1 AND topic = $2 AND partition = $3`, t.connector, ch.Topic, ch.Partition)
		} else {
			_, err = tx.Exec(ctx, `INSERT INTO `+pos+` (connector, topic, partition, next_offset) VALUES ($1, $2, $3, $4)
				ON CONFLICT (connector, topic, partition) DO UPDATE SET next_offset = EXCLUDED.next_offset`, t.connector, ch.Topic, ch.Partition, next)
		}
		if err != nil {
			return fmt.Errorf("set the position of %s: %w", ch, transient(err))
		}
	}
	return transient(tx.Commit(ctx))
}

// ResetPositions deletes every position of the connector.
func (t *task) ResetPositions(ctx context.Context) error {
	_, err := t.pool.Exec(ctx, `DELETE FROM `+t.s.positions.Sanitize()+` WHERE connector = $1`, t.connector)
	return transient(err)
}

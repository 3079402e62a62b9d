//go:build cgo

package connectworker_test

import (
	"context"
	"testing"
	"time"

	"github.com/confluentinc/confluent-kafka-go/v2/schemaregistry"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/causeway-stream/causeway/connect"
	"github.com/causeway-stream/causeway/connect/postgres"
	"github.com/causeway-stream/causeway/framework/serde/registry"
	"github.com/causeway-stream/causeway/runtime/connectworker"
)

type avroShipment struct {
	ID      string    `avro:"id"`
	Carrier *string   `avro:"carrier"`
	At      time.Time `avro:"at"`
	Weight  float64   `avro:"weight"`
}

// Avro values read with the Avro converter make their table with
// auto.create, as with Confluent's AvroConverter and JDBC sink: the
// columns and their types come from the writer's schema (a nullable
// field a nullable column, a timestamp-millis a timestamp), and the rows
// hold the values.
func TestAvroValuesMakeTheirTable(t *testing.T) {
	t.Parallel()
	e := newFakeEnv(t)
	db, conn := e.database("avro", "SELECT 1")
	ctx := context.Background()
	client, err := schemaregistry.NewClient(schemaregistry.NewConfig("mock://avro-table"))
	require.NoError(t, err)
	ser, err := registry.Avro[avroShipment](client, "shipments", registry.Value, registry.Options{})
	require.NoError(t, err)
	conv := connectworker.AvroValueConverter(client)
	dhl := "dhl"
	var recs []connect.Record
	for i, s := range []avroShipment{{ID: "s1", Carrier: &dhl, At: time.Date(2024, 3, 1, 10, 0, 0, 0, time.UTC), Weight: 1.5},
		{ID: "s2", At: time.Date(2024, 3, 2, 11, 30, 0, 0, time.UTC), Weight: 2}} {
		b, err := ser.Serialize(s)
		require.NoError(t, err)
		v, schema, err := conv.Read("shipments", b)
		require.NoError(t, err)
		recs = append(recs, connect.Record{Topic: "shipments", Offset: int64(i), Value: v, ValueSchema: schema})
	}
	cfg, err := postgres.Sink{}.Config().Parse(map[string]string{postgres.ConnectionURL: db, postgres.AutoCreate: "true",
		postgres.PKMode: "record_value", postgres.PKFields: "id", postgres.InsertMode: "upsert"})
	require.NoError(t, err)
	task, err := postgres.Sink{}.Open(ctx, "avro", []string{"shipments"}, cfg)
	require.NoError(t, err)
	defer task.Close()
	rej, err := task.Put(ctx, recs)
	require.NoError(t, err)
	require.Empty(t, rej)
	require.NoError(t, task.Commit(ctx, nil))

	assert.Equal(t, map[string]string{"id": "text NO", "carrier": "text YES", "at": "timestamp without time zone NO", "weight": "double precision NO"},
		columnsOf(t, conn, "shipments"))
	rows, err := conn.Query(ctx, `SELECT id || ' ' || coalesce(carrier, '-') || ' ' || at::text || ' ' || weight FROM shipments ORDER BY id`)
	require.NoError(t, err)
	var got []string
	for rows.Next() {
		var s string
		require.NoError(t, rows.Scan(&s))
		got = append(got, s)
	}
	assert.Equal(t, []string{"s1 dhl 2024-03-01 10:00:00 1.5", "s2 - 2024-03-02 11:30:00 2"}, got)
}

// Change events written in Avro, as Debezium's users configure the
// AvroConverter on both sides, land whole in the target as JSON ones do:
// every record of the capture's topics is in the registry's wire format,
// each topic's key and value schemas registered under its subjects.
func TestAvroChangeEventsLandWholeInTheTarget(t *testing.T) {
	t.Parallel()
	e := newFakeEnv(t)
	avroConverter, registryURL := "io.confluent.connect.avro.AvroConverter", "mock://cdc-avro"
	transactionsLandWhole(t, e, map[string]string{"key.converter": avroConverter, "value.converter": avroConverter,
		"key.converter.schema.registry.url": registryURL, "value.converter.schema.registry.url": registryURL})
	n := 0
	for ch, recs := range e.cdcTopics("shop") {
		for _, r := range recs {
			for _, b := range [][]byte{r.msg.Key, r.msg.Value} {
				if b != nil {
					require.GreaterOrEqual(t, len(b), 5, "%s: %q", ch, b)
					require.Equal(t, byte(0), b[0], "%s: not in the wire format: %q", ch, b)
					n++
				}
			}
		}
	}
	assert.Positive(t, n)
	subjects, err := connectworker.MockRegistry(registryURL).GetAllSubjects()
	require.NoError(t, err)
	for _, topic := range []string{"shop.public.orders", "shop.public.lines", "shop.public.stock", "shop.transaction"} {
		assert.Contains(t, subjects, topic+"-key")
		assert.Contains(t, subjects, topic+"-value")
	}
}

package connectworker_test

import (
	"bytes"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Kafka Connect 4's smaller REST answers: GET /health (KIP-1017), the
// Location of a connector POST made, and PATCH of a configuration
// (KIP-477), where a null removes a setting and a wrong one is refused as
// a PUT's would be.
func TestTheRESTAPIAnswersHealthLocationAndPatch(t *testing.T) {
	t.Parallel()
	_, db, w := ordersOnFake(t, "CREATE TABLE orders (id text PRIMARY KEY, amount int NOT NULL);")

	code, body := w.call(t, "GET", "/health", nil)
	require.Equal(t, 200, code, "%v", body)
	assert.Equal(t, "healthy", shaped(t, "WorkerHealth", body)["status"])

	cfg := map[string]string{"connector.class": "PostgresSink", "topics": "orders", "connection.url": db, "pk.mode": "record_key",
		"value.converter.schemas.enable": "false", "batch.size": "10"}
	req, err := http.NewRequest("POST", w.base+"/connectors", bytes.NewReader(mustJSON(t, map[string]any{"name": "shop two", "config": cfg})))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, 201, resp.StatusCode)
	assert.Equal(t, "/connectors/shop%20two", resp.Header.Get("Location"))

	code, body = w.call(t, "PATCH", "/connectors/shop%20two/config", map[string]any{"batch.size": nil, "insert.mode": "upsert"})
	require.Equal(t, 200, code, "%v", body)
	got := shaped(t, "ConnectorInfo", body)["config"].(map[string]any)
	assert.Equal(t, "upsert", got["insert.mode"])
	assert.NotContains(t, got, "batch.size", "a null removes the setting")
	assert.Equal(t, "orders", got["topics"], "the others stay")

	code, body = w.call(t, "PATCH", "/connectors/shop%20two/config", map[string]any{"insert.mode": "merge"})
	assert.Equal(t, 400, code)
	assert.Contains(t, shaped(t, "ErrorMessage", body)["message"], `insert.mode`)
	code, _ = w.call(t, "PATCH", "/connectors/none/config", map[string]any{"insert.mode": "upsert"})
	assert.Equal(t, 404, code)
}

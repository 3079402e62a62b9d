package runtime_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/causeway-stream/causeway/framework/dsl"
	"github.com/causeway-stream/causeway/framework/serde"
	"github.com/causeway-stream/causeway/runtime"
)

// A versioned store answers over HTTP: a get gives a key's latest
// version with its time, or with as_of the version valid then and until
// when; versions lists the history newest first; a late record is in the
// history, not the latest; a time older than the history finds nothing.
func TestVersionedStoresAnswerOverHTTP(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	createTopics(t, b.Addr(), 2, "prices")
	text := serde.Codec[string, string]{Key: serde.String(), Value: serde.String()}
	db := dsl.NewBuilder("prices")
	dsl.TableFrom(db, "prices", "price-history", text, dsl.Versioned(4*time.Hour))
	topo, err := db.Build()
	require.NoError(t, err)

	now := time.Now().UTC().Truncate(time.Second)
	at := func(h int) time.Time { return now.Add(time.Duration(-h) * time.Hour) }
	p := newProducer(t, b.Addr())
	for _, r := range []struct {
		at    time.Time
		price string
	}{{at(3), "1"}, {at(1), "3"}, {at(2), "2"}} { // the last one late
		require.NoError(t, p.ProduceSync(context.Background(), &kgo.Record{Topic: "prices", Key: []byte("a"), Value: []byte(r.price), Timestamp: r.at}).FirstErr())
	}

	w := startTopology(t, testConfig(t, b.Addr(), "prices"), topo, nil)
	srv := runtime.NewServer("127.0.0.1:0", w, zap.NewNop())
	require.NoError(t, srv.Start(context.Background()))
	t.Cleanup(func() { assert.NoError(t, srv.Stop(context.Background())) })
	base := "http://" + srv.Addr() + "/stores/price-history/"
	ask := func(path string) (int, []byte) {
		res, err := http.Get(base + path)
		require.NoError(t, err)
		defer res.Body.Close()
		body, err := io.ReadAll(res.Body)
		require.NoError(t, err)
		return res.StatusCode, body
	}
	type version struct {
		Found     bool       `json:"found"`
		Value     []byte     `json:"value"`
		Timestamp time.Time  `json:"timestamp"`
		ValidTo   *time.Time `json:"valid_to"`
	}
	var latest version
	require.Eventually(t, func() bool {
		code, body := ask("get?key=a")
		latest = version{}
		return code == http.StatusOK && json.Unmarshal(body, &latest) == nil && latest.Found && latest.Timestamp.Equal(at(1))
	}, 30*time.Second, 50*time.Millisecond, "the latest price")
	assert.Equal(t, "3", string(latest.Value))
	assert.Nil(t, latest.ValidTo, "the latest is valid on")

	ms := func(t time.Time) string { return strconv.FormatInt(t.UnixMilli(), 10) }
	code, body := ask("get?key=a&as_of=" + ms(at(2).Add(time.Minute)))
	require.Equal(t, http.StatusOK, code, "%s", body)
	var then version
	require.NoError(t, json.Unmarshal(body, &then))
	assert.Equal(t, "2", string(then.Value), "the late record, as of its time")
	require.NotNil(t, then.ValidTo)
	assert.True(t, then.ValidTo.Equal(at(1)))

	code, body = ask("get?key=a&as_of=" + ms(at(5)))
	require.Equal(t, http.StatusOK, code, "%s", body)
	var gone version
	require.NoError(t, json.Unmarshal(body, &gone))
	assert.False(t, gone.Found, "older than the history")

	code, body = ask("versions?key=a")
	require.Equal(t, http.StatusOK, code, "%s", body)
	var history struct {
		Entries []version `json:"entries"`
	}
	require.NoError(t, json.Unmarshal(body, &history))
	var prices []string
	for _, e := range history.Entries {
		prices = append(prices, string(e.Value))
	}
	assert.Equal(t, []string{"3", "2", "1"}, prices, "newest first")

	code, _ = ask("windows?key=a")
	assert.Equal(t, http.StatusBadRequest, code, "a versioned store has no windows")
}

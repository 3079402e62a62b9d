package runtime_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/causeway-stream/causeway/framework/dsl"
	"github.com/causeway-stream/causeway/framework/serde"
	"github.com/causeway-stream/causeway/operators"
	"github.com/causeway-stream/causeway/runtime"
)

// pageViews is what the window store below keeps per user and minute.
type pageViews struct {
	Views int    `json:"views"`
	Last  string `json:"last"`
}

// A window store answers over HTTP: by default one key's windows that
// started in the last hour, each with its start, the time of its latest
// record and its value as JSON; since reaches further back; a get on it
// says to ask for windows instead.
func TestWindowStoresAnswerOverHTTP(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	createTopics(t, b.Addr(), 2, "views", "per-minute")
	text := serde.Codec[string, string]{Key: serde.String(), Value: serde.String()}
	db := dsl.NewBuilder("views")
	windowed := dsl.WindowedBy(dsl.From(db, "views", text).GroupByKey(), operators.Tumbling(time.Minute, 4*time.Hour)) // keeps the old window
	dsl.WindowedAggregate(windowed, "views-per-minute", func() pageViews { return pageViews{} },
		func(_ string, page string, acc pageViews) (pageViews, error) {
			return pageViews{Views: acc.Views + 1, Last: page}, nil
		}, serde.JSON[pageViews]())
	topo, err := db.Build()
	require.NoError(t, err)

	now := time.Now().UTC().Truncate(time.Minute)
	recent, old := now.Add(-10*time.Minute), now.Add(-3*time.Hour)
	p := newProducer(t, b.Addr())
	for _, r := range []struct {
		at   time.Time
		page string
	}{{old, "/old"}, {recent, "/a"}, {recent.Add(time.Second), "/b"}} {
		require.NoError(t, p.ProduceSync(context.Background(), &kgo.Record{Topic: "views", Key: []byte("u1"), Value: []byte(r.page), Timestamp: r.at}).FirstErr())
	}

	w := startTopology(t, testConfig(t, b.Addr(), "views"), topo, nil)
	srv := runtime.NewServer("127.0.0.1:0", w, zap.NewNop())
	require.NoError(t, srv.Start(context.Background()))
	t.Cleanup(func() { assert.NoError(t, srv.Stop(context.Background())) })
	base := "http://" + srv.Addr() + "/stores/views-per-minute/"

	ask := func(path string) (int, []byte) {
		res, err := http.Get(base + path)
		require.NoError(t, err)
		defer res.Body.Close()
		body, err := io.ReadAll(res.Body)
		require.NoError(t, err)
		return res.StatusCode, body
	}
	type window struct {
		Start     time.Time `json:"start"`
		Timestamp time.Time `json:"timestamp"`
		ValueJSON pageViews `json:"value_json"`
	}
	var a struct {
		Since   time.Time `json:"since"`
		Entries []window  `json:"entries"`
	}
	require.Eventually(t, func() bool {
		code, body := ask("windows?key=u1")
		a.Entries = nil
		return code == http.StatusOK && json.Unmarshal(body, &a) == nil && len(a.Entries) == 1 && a.Entries[0].ValueJSON.Views == 2
	}, 30*time.Second, 100*time.Millisecond, "the recent window, with both views")
	assert.WithinDuration(t, time.Now().Add(-time.Hour), a.Since, time.Minute, "by default the last hour")
	assert.Equal(t, recent, a.Entries[0].Start.UTC())
	assert.Equal(t, recent.Add(time.Second), a.Entries[0].Timestamp.UTC(), "the time of its latest record")
	assert.Equal(t, pageViews{Views: 2, Last: "/b"}, a.Entries[0].ValueJSON)

	code, body := ask("windows?key=u1&since=" + url.QueryEscape(strconv.FormatInt(old.Add(-time.Minute).UnixMilli(), 10)))
	require.Equal(t, http.StatusOK, code, string(body))
	require.NoError(t, json.Unmarshal(body, &a))
	require.Len(t, a.Entries, 2, string(body))
	assert.Equal(t, old, a.Entries[0].Start.UTC())
	assert.Equal(t, pageViews{Views: 1, Last: "/old"}, a.Entries[0].ValueJSON)

	code, body = ask("get?key=u1")
	assert.Equal(t, http.StatusBadRequest, code)
	assert.Contains(t, string(body), `store "views-per-minute" is a window store`)
}

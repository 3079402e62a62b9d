package pagetest

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.uber.org/zap"

	"github.com/causeway-stream/causeway/framework/dsl"
	"github.com/causeway-stream/causeway/framework/serde"
	"github.com/causeway-stream/causeway/runtime"
	"github.com/causeway-stream/causeway/runtime/embedded"
)

// The page asks a versioned store for a key's history, newest first, each
// version with when it was put and when the next took over, and for the
// version valid at a time.
func TestPageQueriesAVersionedStore(t *testing.T) {
	b, err := embedded.Start()
	require.NoError(t, err)
	defer b.Close()
	db := dsl.NewBuilder("prices")
	dsl.TableFrom(db, "prices", "price-history", serde.Codec[string, string]{Key: serde.String(), Value: serde.String()}, dsl.Versioned(4*time.Hour))
	topo, err := db.Build()
	require.NoError(t, err)
	cfg := runtime.DefaultConfig()
	cfg.ApplicationID, cfg.BootstrapServers, cfg.StateDir, cfg.HTTPAddr = "prices", b.Addr(), t.TempDir(), ""
	cfg.CreateTopics, cfg.DefaultPartitions = true, 1
	w, err := runtime.NewInstance(cfg, topo, zap.NewNop(), nil)
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	require.NoError(t, w.Start(ctx))
	defer func() { assert.NoError(t, w.Stop(context.Background())) }()
	srv := runtime.NewServer("127.0.0.1:0", w, zap.NewNop())
	require.NoError(t, srv.Start(ctx))
	defer func() { assert.NoError(t, srv.Stop(context.Background())) }()

	now := time.Now().UTC().Truncate(time.Second)
	at := func(h int) time.Time { return now.Add(time.Duration(-h) * time.Hour) }
	p, err := kgo.NewClient(kgo.SeedBrokers(b.Addr()))
	require.NoError(t, err)
	for _, r := range []struct {
		at    time.Time
		price string
	}{{at(3), "p-101"}, {at(1), "p-303"}, {at(2), "p-202"}} {
		require.NoError(t, p.ProduceSync(ctx, &kgo.Record{Topic: "prices", Key: []byte("a"), Value: []byte(r.price), Timestamp: r.at}).FirstErr())
	}
	p.Close()
	for {
		a, err := w.Query(ctx, runtime.Query{Store: "price-history", Kind: runtime.QueryGet, Key: []byte("a")})
		if err == nil && string(a.Value) == "p-303" {
			break
		}
		if err != nil && !errors.Is(err, runtime.ErrNotAvailable) && !errors.Is(err, runtime.ErrNotLocal) {
			require.NoError(t, err)
		}
		require.NoError(t, ctx.Err(), "the store never held the prices")
		time.Sleep(50 * time.Millisecond)
	}

	bctx := browser(t)
	require.NoError(t, chromedp.Do(bctx,
		chromedp.Navigate("http://"+srv.Addr()+"/"),
		chromedp.WaitReady(chromedp.CSS(`#query-store option[value="price-history"]`)),
		chromedp.SetValue(chromedp.CSS(`#query-store`), "price-history"),
		chromedp.SetValue(chromedp.CSS(`#query-kind`), "versions"),
		chromedp.SendKeys(chromedp.CSS(`#query-key`), "a"),
		chromedp.Click(chromedp.CSS(`#query button`)),
		chromedp.WaitVisible(chromedp.CSS(`#answer tbody td + td`)),
	))
	history, err := chromedp.Run(bctx, chromedp.Text(chromedp.CSS(`#answer tbody`)))
	require.NoError(t, err)
	i3, i2, i1 := strings.Index(history, "p-303"), strings.Index(history, "p-202"), strings.Index(history, "p-101")
	assert.True(t, i3 >= 0 && i3 < i2 && i2 < i1, "newest first: %q", history)
	assert.Contains(t, history, " to "+at(1).Format(time.RFC3339), "p-202 ended when p-303 came")

	asOf := strconv.FormatInt(at(2).Add(time.Minute).UnixMilli(), 10)
	require.NoError(t, chromedp.Do(bctx,
		chromedp.SetValue(chromedp.CSS(`#query-kind`), "get"),
		chromedp.SendKeys(chromedp.CSS(`#query-asof`), asOf),
		chromedp.Click(chromedp.CSS(`#query button`)),
	))
	var got string
	for !strings.Contains(got, "p-202") || strings.Contains(got, "p-303") { // the history until the get's answer comes
		require.NoError(t, bctx.Err(), "the page never showed the version as of the time: %q", got)
		got, err = chromedp.Run(bctx, chromedp.Text(chromedp.CSS(`#answer tbody`)))
		require.NoError(t, err)
		time.Sleep(20 * time.Millisecond)
	}
	assert.Contains(t, got, "a @ "+at(2).Format(time.RFC3339)+" to "+at(1).Format(time.RFC3339))
}

package pagetest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/zap"

	"github.com/causeway-stream/causeway/connect"
	"github.com/causeway-stream/causeway/runtime/connectworker"
	"github.com/causeway-stream/causeway/runtime/embedded"
)

// The connect worker's page lists a connector with its task's state, and
// its pause button pauses it: the page shows PAUSED, and so does the REST
// API.
func TestConnectPageShowsConnectorsAndPausesThem(t *testing.T) {
	b, err := embedded.Start()
	require.NoError(t, err)
	defer b.Close()
	w, err := connectworker.New(connectworker.Config{Bootstrap: b.Addr(), Listen: "127.0.0.1:0", WorkerID: "page",
		Heartbeat: 300 * time.Millisecond, Log: zap.NewNop()})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	defer func() {
		cancel()
		assert.NoError(t, <-done)
	}()
	base := "http://" + w.Addr()
	var resp *http.Response
	for deadline := time.Now().Add(30 * time.Second); ; {
		resp, err = http.Post(base+"/connectors", "application/json",
			strings.NewReader(`{"name": "web", "config": {"connector.class": "HttpSource", "http.topics": "events"}}`))
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusCreated, resp.StatusCode)

	bctx := browser(t)
	require.NoError(t, chromedp.Do(bctx,
		chromedp.Navigate(base+"/ui/"),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-connector="web"] [data-task="0"] span.RUNNING`)),
	))
	// The page draws its rows anew at each refresh: a text is read in one
	// step with finding its node, or the node may be gone in between.
	taskState, err := chromedp.Run(bctx, chromedp.Evaluate[string](textOf(`tr[data-connector="web"] [data-task="0"] span`)))
	require.NoError(t, err)
	// Clicked the same way: found and clicked in one step (a click that
	// found the button, then asked for it after a refresh, failed with
	// "Could not find node with given id").
	clicked, err := chromedp.Run(bctx, chromedp.Evaluate[bool](clickOn(`tr[data-connector="web"] button[data-action="pause"]`)))
	require.NoError(t, err)
	require.True(t, clicked, "the pause button")
	require.NoError(t, chromedp.Do(bctx, chromedp.WaitVisible(chromedp.CSS(`tr[data-connector="web"] span.state.PAUSED`))))
	connState, err := chromedp.Run(bctx, chromedp.Evaluate[string](textOf(`tr[data-connector="web"] span.state`)))
	require.NoError(t, err)
	assert.Equal(t, "RUNNING", taskState)
	assert.Equal(t, "PAUSED", connState)

	resp, err = http.Get(base + "/connectors/web/status")
	require.NoError(t, err)
	defer resp.Body.Close()
	var st connectworker.ConnectorStateInfo
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&st))
	assert.Equal(t, "PAUSED", st.Connector.State)
}

// textOf is a script that returns the text of the first node css finds,
// or "" when there is none.
func textOf(css string) string {
	q, _ := json.Marshal(css)
	return fmt.Sprintf(`(document.querySelector(%s) || {innerText: ""}).innerText`, q)
}

// clickOn is a script that clicks the first element css finds, and says
// whether there was one.
func clickOn(css string) string {
	q, _ := json.Marshal(css)
	return fmt.Sprintf(`(() => { const e = document.querySelector(%s); if (!e) return false; e.click(); return true; })()`, q)
}

// describedSource is a source whose task writes nothing and says it
// stands where position says.
type describedSource struct{ position *atomic.Value }

func (describedSource) Config() *connect.ConfigDef { return &connect.ConfigDef{} }

func (s describedSource) Open(context.Context, string, connect.Config) (connect.SourceTask, error) {
	return describedTask(s), nil
}

type describedTask describedSource

func (describedTask) Poll(ctx context.Context, _ []byte) ([]connect.SourceRecord, error) {
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(50 * time.Millisecond):
		return nil, nil
	}
}

func (describedTask) Close() error { return nil }

func (t describedTask) Describe() map[string]string {
	return map[string]string{"slot": "orders_slot", "last_written_lsn": t.position.Load().(string)}
}

// The page shows what a task says of where it stands (a capture's slot
// and last position), and follows it as it moves.
func TestConnectPageShowsWhereATaskStands(t *testing.T) {
	b, err := embedded.Start()
	require.NoError(t, err)
	defer b.Close()
	position := &atomic.Value{}
	position.Store("0/16B3748")
	w, err := connectworker.New(connectworker.Config{Bootstrap: b.Addr(), Listen: "127.0.0.1:0", WorkerID: "page",
		Heartbeat: 200 * time.Millisecond, Log: zap.NewNop(), Sources: map[string]connect.Source{"Described": describedSource{position}}})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	defer func() {
		cancel()
		assert.NoError(t, <-done)
	}()
	base := "http://" + w.Addr()
	for deadline := time.Now().Add(30 * time.Second); ; {
		resp, err := http.Post(base+"/connectors", "application/json",
			strings.NewReader(`{"name": "capture", "config": {"connector.class": "Described"}}`))
		if err == nil {
			resp.Body.Close()
			require.Equal(t, http.StatusCreated, resp.StatusCode)
			break
		}
		require.False(t, time.Now().After(deadline), "the worker does not answer: %v", err)
		time.Sleep(50 * time.Millisecond)
	}
	fact := `tr[data-connector="capture"] [data-task="0"] [data-fact="last_written_lsn"]`
	bctx := browser(t)
	require.NoError(t, chromedp.Do(bctx,
		chromedp.Navigate(base+"/ui/"),
		chromedp.WaitVisible(chromedp.CSS(fact)),
	))
	first, err := chromedp.Run(bctx, chromedp.Evaluate[string](textOf(fact)))
	require.NoError(t, err)
	slot, err := chromedp.Run(bctx, chromedp.Evaluate[string](textOf(`tr[data-connector="capture"] [data-fact="slot"]`)))
	require.NoError(t, err)
	assert.Equal(t, "last_written_lsn: 0/16B3748", first)
	assert.Equal(t, "slot: orders_slot", slot)

	position.Store("0/1700000")
	var moved string
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		// Until the new position: a redraw in between reads as "".
		if moved, err = chromedp.Run(bctx, chromedp.Evaluate[string](textOf(fact))); err == nil && moved == "last_written_lsn: 0/1700000" {
			break
		}
	}
	assert.Equal(t, "last_written_lsn: 0/1700000", moved, "the page follows the task")
}

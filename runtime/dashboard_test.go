package runtime

import (
	"encoding/json"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// dashboardFile is the Grafana dashboard docs/operations.md points to.
const dashboardFile = "../docs/grafana/causeway-dashboard.json"

// registeredNames are the names of the series the worker's metrics
// export: each family's name, and a histogram's _bucket, _sum and _count.
func registeredNames(t *testing.T) map[string]bool {
	t.Helper()
	m := NewMetrics()
	mfs, err := m.Registry.Gather()
	require.NoError(t, err)
	names := map[string]bool{}
	for _, mf := range mfs {
		names[mf.GetName()] = true
	}
	// Vectors without a series yet are missing from Gather: their
	// descriptions name them.
	descs := make(chan *prometheus.Desc, 64)
	go func() {
		defer close(descs)
		for _, c := range m.own() {
			c.Describe(descs)
		}
	}()
	fq := regexp.MustCompile(`fqName: "([^"]+)"`)
	for d := range descs {
		if m := fq.FindStringSubmatch(d.String()); m != nil {
			names[m[1]] = true
		}
	}
	for n := range names {
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			names[n+suffix] = true
		}
	}
	return names
}

// queriedMetrics returns the causeway_ series a dashboard's queries use.
func queriedMetrics(t *testing.T, dashboard []byte) []string {
	t.Helper()
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	require.NoError(t, json.Unmarshal(dashboard, &d))
	name := regexp.MustCompile(`\bcauseway_[a-z0-9_]+`)
	var used []string
	for _, p := range d.Panels {
		require.NotEmpty(t, p.Targets, "panel %q queries nothing", p.Title)
		for _, tg := range p.Targets {
			used = append(used, name.FindAllString(tg.Expr, -1)...)
		}
	}
	slices.Sort(used)
	return slices.Compact(used)
}

// missingMetrics are the series a dashboard queries that the worker does
// not export.
func missingMetrics(t *testing.T, dashboard []byte) []string {
	have := registeredNames(t)
	var missing []string
	for _, n := range queriedMetrics(t, dashboard) {
		if !have[n] {
			missing = append(missing, n)
		}
	}
	return missing
}

// Every metric the Grafana dashboard in docs queries is one the worker
// exports, and the dashboard shows lag and latency.
func TestTheDashboardQueriesOnlyMetricsTheWorkerExports(t *testing.T) {
	dashboard, err := os.ReadFile(dashboardFile)
	require.NoError(t, err)
	assert.Empty(t, missingMetrics(t, dashboard))
	used := queriedMetrics(t, dashboard)
	for _, want := range []string{"causeway_committed_lag_records", "causeway_delivered_lag_records", "causeway_held_records",
		"causeway_end_to_end_latency_seconds_bucket", "causeway_task_state"} {
		assert.Contains(t, used, want)
	}

	t.Run("a misspelt metric is caught", func(t *testing.T) {
		bad := strings.Replace(string(dashboard), "causeway_committed_lag_records", "causeway_commited_lag_records", 1)
		assert.Equal(t, []string{"causeway_commited_lag_records"}, missingMetrics(t, []byte(bad)))
	})
}

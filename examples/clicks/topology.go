package main

import (
	"time"

	"github.com/causeway-stream/causeway/framework"
	"github.com/causeway-stream/causeway/framework/dsl"
	"github.com/causeway-stream/causeway/framework/serde"
	"github.com/causeway-stream/causeway/operators"
)

// Topic and store names of the example.
const (
	ViewsTopic       = "views"
	ProfilesTopic    = "profiles"
	RegionViewsTopic = "region-views"
	DeadLetterTopic  = "clicks-dead-letters"
	ProfilesStore    = "profiles"
	RegionViewsStore = "region-views"
)

// Window is the length of the windows views are counted in. Grace is how
// late, in view time, a view may reach the windows and still count. The
// join tasks that feed each partition of the windows' repartition topic
// go each at its own pace, so the views of one region reach the windows
// out of order by as much as those tasks drift apart, in view time: the
// grace must cover that, as in Kafka Streams.
const (
	Window = time.Minute
	Grace  = 15 * time.Minute
)

// View is one page view, keyed by the user who made it. At is when it
// happened, which the counts go by, not the time Kafka gave the record.
type View struct {
	Page string    `json:"page"`
	At   time.Time `json:"at"`
}

// Profile is a user's row in the profiles table.
type Profile struct {
	Region string `json:"region"`
}

// Topology joins each view to its user's profile, re-keys it by the
// profile's region and counts views per region in one-minute tumbling
// windows, by the time in the view: each window's count is written to
// region-views once, when stream time passes its end plus the grace. A
// view that is not JSON goes to the dead-letter topic with where it came
// from and why; one without a time is skipped and reported as
// "invalid-timestamp".
func Topology() (*framework.Topology, error) {
	b := dsl.NewBuilder("clicks")
	b.OnBadInput(framework.DeadLetter, DeadLetterTopic)
	views := dsl.From(b, ViewsTopic, serde.Codec[string, View]{Key: serde.String(), Value: serde.JSON[View]()},
		dsl.WithTimestamp(func(_ string, v View) time.Time { return v.At }, framework.SkipOnInvalidTimestamp))
	profiles := dsl.TableFrom(b, ProfilesTopic, ProfilesStore, serde.Codec[string, Profile]{Key: serde.String(), Value: serde.JSON[Profile]()})
	regions := dsl.Join(views, profiles, func(_ string, _ View, p Profile) (string, error) { return p.Region, nil })
	byRegion := dsl.GroupBy(regions, func(_, region string) (string, error) { return region, nil })
	dsl.WindowedBy(byRegion, operators.Tumbling(Window, Grace)).EmitOnWindowClose().
		Count(RegionViewsStore).
		ToStream().To(RegionViewsTopic)
	return b.Build()
}

package pgcdc

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestKafkaTopicName(t *testing.T) {
	long := "shop.public." + strings.Repeat("t", 300)
	cases := []struct {
		name, in, want string
	}{
		{name: "allowed as it is", in: "shop.public.order_lines-2", want: "shop.public.order_lines-2"},
		{name: "space, quote, backslash", in: `shop.public.order "lines"\x`, want: "shop.public.order__lines__x"},
		{name: "one for each UTF-16 unit", in: "shop.public.größe\U0001F600", want: "shop.public.gr__e__"},
		{name: "cut to Kafka's limit", in: long, want: long[:249]},
		{name: "dot", in: ".", want: "_"},
		{name: "two dots", in: "..", want: "__"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.want, kafkaTopicName(c.in))
		})
	}
}

func TestSettingsThatNameTopicsTakeKafkasCharactersOnly(t *testing.T) {
	for _, key := range []string{TopicPrefix, HeartbeatTopicPrefix, TransactionTopic} {
		t.Run(key, func(t *testing.T) {
			values := map[string]string{URL: "postgres://u@localhost/db", TopicPrefix: "shop"}
			_, err := Source{}.Config().Parse(values)
			assert.NoError(t, err)
			values[key] = "my shop"
			_, err = Source{}.Config().Parse(values)
			if assert.Error(t, err) {
				assert.Contains(t, err.Error(), key)
				assert.Contains(t, err.Error(), "' '")
			}
		})
	}
}

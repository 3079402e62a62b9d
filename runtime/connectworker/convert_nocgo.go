//go:build !cgo

package connectworker

import "errors"

// converter turns a record's value into the JSON object a sink writes.
type converter func(topic string, value []byte) ([]byte, error)

// converterFor is the value converter cfg names; nil for JSON. The Avro
// converter needs the Schema Registry serdes, which need cgo.
func converterFor(cfg map[string]string) (converter, error) {
	if cfg[keyValueConverter] != AvroConverter {
		return nil, nil
	}
	return nil, errors.New("the Avro converter needs a worker built with cgo")
}

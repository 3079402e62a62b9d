//go:build !cgo

package connectworker

import (
	"errors"

	"github.com/causeway-stream/causeway/connect"
)

// avroConverter fails: the Avro converter needs the Schema Registry
// serdes, which need cgo.
func avroConverter(string, bool) (avroToJSON, error) {
	return avroToJSON{}, errors.New("the Avro converter needs a worker built with cgo")
}

// avroToJSON is not built without cgo.
type avroToJSON struct{}

// Read implements convert.Converter.
func (avroToJSON) Read(string, []byte) ([]byte, *connect.Schema, error) {
	return nil, nil, errors.New("the Avro converter needs a worker built with cgo")
}

// avroWriter is not built without cgo.
type avroWriter struct{}

// newAvroWriter fails: the Avro converter needs cgo.
func newAvroWriter(string, bool) (*avroWriter, error) {
	return nil, errors.New("the Avro converter needs a worker built with cgo")
}

func (*avroWriter) write(string, []byte, *connect.Schema) ([]byte, error) {
	return nil, errors.New("the Avro converter needs a worker built with cgo")
}

//go:build cgo

package connectworker

import (
	"github.com/confluentinc/confluent-kafka-go/v2/schemaregistry"

	"github.com/causeway-stream/causeway/connect/convert"
)

// AvroValueConverter is the Avro value converter over client, for the
// tests outside the package.
func AvroValueConverter(client schemaregistry.Client) convert.Converter {
	return newAvroToJSON(client, false)
}

// MockRegistry is the registry the worker's Avro converters given the
// mock:// URL url share.
func MockRegistry(url string) schemaregistry.Client {
	c, _ := registryClient(url)
	return c
}

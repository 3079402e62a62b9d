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

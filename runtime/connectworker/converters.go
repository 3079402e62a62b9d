package connectworker

import (
	"fmt"
	"strings"

	"github.com/causeway-stream/causeway/connect"
	"github.com/causeway-stream/causeway/connect/convert"
)

// The converter settings, named as Kafka Connect names them; each takes
// its converter's own settings under its name and a dot
// (value.converter.schemas.enable).
const (
	keyKeyConverter   = "key.converter"
	keyValueConverter = "value.converter"
)

// converters are a connector's key and value converters. A nil key
// converter leaves keys as they are (see keyConverterDoc).
type converters struct {
	key, value convert.Converter
}

const keyConverterDoc = "How record keys are read, as value.converter. Not given: a key that is a JSON object is read as one, any other as one value (its JSON, or its bytes as a string)."

// converterSettings are the settings of the converter at prefix
// (key.converter or value.converter), without the prefix.
func converterSettings(cfg map[string]string, prefix string) map[string]string {
	out := map[string]string{}
	for k, v := range cfg {
		if rest, ok := strings.CutPrefix(k, prefix+"."); ok {
			out[rest] = v
		}
	}
	return out
}

// converterErrors checks the converters cfg names for a connector of kind
// (the HTTP source when http): each converter's own settings, the
// registry an Avro one needs, and that a source's are ones sources write:
// JSON, with or without schemas, or Avro, which the HTTP source, whose
// records have no schema, cannot write.
func converterErrors(cfg map[string]string, kind pluginKind, http bool) []*connect.FieldError {
	var out []*connect.FieldError
	for _, prefix := range []string{keyKeyConverter, keyValueConverter} {
		class, given := cfg[prefix]
		settings := converterSettings(cfg, prefix)
		switch {
		case given:
		case prefix == keyValueConverter && (kind == kindSink || len(settings) > 0):
			class = convert.JSON // the default
		case len(settings) > 0:
			for name := range settings {
				out = append(out, &connect.FieldError{Field: prefix + "." + name, Reason: "is a setting of a converter, and " + prefix + " is not given"})
			}
			continue
		default:
			continue
		}
		if class == convert.Avro {
			if settings["schema.registry.url"] == "" {
				out = append(out, &connect.FieldError{Field: prefix + ".schema.registry.url", Reason: "is required with the Avro converter"})
			}
			for name := range settings {
				if name != "schema.registry.url" {
					// Registry authentication, subject strategies and the
					// like are not read: refused rather than ignored.
					out = append(out, &connect.FieldError{Field: prefix + "." + name, Reason: "is not supported: the Avro converter reads only schema.registry.url"})
				}
			}
			if http {
				out = append(out, &connect.FieldError{Field: prefix, Reason: "the HTTP source's records have no schema, which Avro needs: give the JsonConverter, or no converter"})
			}
			continue
		}
		def, err := convert.Def(class)
		if err != nil {
			continue // the common settings name the classes allowed
		}
		for _, v := range def.Validate(settings).Values {
			for _, e := range v.Errors {
				out = append(out, &connect.FieldError{Field: prefix + "." + v.Key.Name, Reason: e})
			}
		}
		for name := range settings {
			if !knownKey(def, name) {
				out = append(out, &connect.FieldError{Field: prefix + "." + name, Reason: fmt.Sprintf("is not a setting of %s", class)})
			}
		}
		if kind == kindSource && class != convert.JSON {
			out = append(out, &connect.FieldError{Field: prefix, Reason: "sources write JSON or Avro: give the JsonConverter (schemas.enable true writes the source's schemas beside its data), the AvroConverter, or no converter"})
		}
	}
	return out
}

// knownKey reports whether def defines the setting name.
func knownKey(def *connect.ConfigDef, name string) bool {
	for _, k := range def.Keys {
		if k.Name == name {
			return true
		}
	}
	return false
}

// convertersFor makes the converters of a sink's configuration cfg,
// already validated. The value's default is the JsonConverter with its
// own defaults (schemas.enable true, as Kafka Connect's).
func convertersFor(cfg map[string]string) (converters, error) {
	var out converters
	var err error
	if class, ok := cfg[keyKeyConverter]; ok {
		if out.key, err = converterOf(class, converterSettings(cfg, keyKeyConverter), true); err != nil {
			return converters{}, fmt.Errorf("%s: %w", keyKeyConverter, err)
		}
	}
	class, ok := cfg[keyValueConverter]
	if !ok {
		class = convert.JSON
	}
	if out.value, err = converterOf(class, converterSettings(cfg, keyValueConverter), false); err != nil {
		return converters{}, fmt.Errorf("%s: %w", keyValueConverter, err)
	}
	return out, nil
}

func converterOf(class string, settings map[string]string, key bool) (convert.Converter, error) {
	if class == convert.Avro {
		return avroConverter(settings["schema.registry.url"], key)
	}
	return convert.New(class, settings)
}

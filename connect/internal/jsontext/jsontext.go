// Package jsontext appends Go strings to JSON text being built by hand, as
// string literals any JSON reader takes: strconv's quoting is Go's syntax
// (\x1b, \a, \v, \U0001xxxx), which JSON does not have.
package jsontext

import "unicode/utf8"

const hex = "0123456789abcdef"

// AppendString appends s to b as a JSON string literal, quotes included.
// It escapes what JSON requires (the quote, the backslash, and the
// control characters below U+0020) and nothing more, as Jackson does for
// Kafka Connect's JsonConverter; a byte that is not UTF-8 becomes U+FFFD,
// as encoding/json writes it.
func AppendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0 // s[start:i] is still to be copied as it is
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r != utf8.RuneError || size != 1 {
				i += size
				continue
			}
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i++
			start = i
			continue
		}
		b = append(b, s[start:i]...)
		switch c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		case '\b':
			b = append(b, '\\', 'b')
		case '\f':
			b = append(b, '\\', 'f')
		default:
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		}
		i++
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

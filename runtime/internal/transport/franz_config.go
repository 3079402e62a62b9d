package transport

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
)

// The worker's helper readers (restores, global tables, the members
// topic) are franz-go clients. They must reach the cluster the way the
// librdkafka clients do, so the settings given with --kafka that decide
// how to connect are carried over to franz-go's own options; those that
// only tune a client are left to each client.

// errFranzSetting is a --kafka setting that franz-go cannot follow.
var errFranzSetting = errors.New("franz-go cannot connect as this librdkafka setting asks")

// tuningPrefixes are librdkafka settings that only tune clients, and so do
// not bear on how franz-go connects.
var tuningPrefixes = []string{"queued.", "fetch.", "max.partition.fetch.", "linger.", "batch.", "queue.", "message.",
	"session.", "heartbeat.", "transaction.", "statistics.", "compression.", "log.", "debug",
	"partition.assignment.strategy", "max.poll.interval.ms", "retry.", "retries", "request.timeout.ms", "acks",
	"socket.", "reconnect.", "connections.", "topic.metadata.", "metadata.", "api.version.", "broker.version.fallback",
	"client.rack", "enable.idempotence", "check.crcs", "allow.auto.create.topics", "auto.commit.", "auto.offset.reset"}

// connectionKeys are the librdkafka settings franzConnection carries over.
var connectionKeys = []string{"security.protocol", "sasl.mechanism", "sasl.mechanisms", "sasl.username", "sasl.password",
	"ssl.ca.location", "ssl.certificate.location", "ssl.key.location", "enable.ssl.certificate.verification",
	"ssl.endpoint.identification.algorithm", "client.id", "enable.metrics.push"}

// FranzConnection returns the franz-go options that connect as librdkafka
// does with settings: the security protocol; SASL PLAIN, SCRAM-SHA-256 and
// SCRAM-SHA-512; TLS with a CA file, a client certificate and key, and
// the verification settings; the client id; and, as for the librdkafka
// clients, no KIP-714 client metrics pushed to the brokers unless
// enable.metrics.push is true. Any other setting that is not a client's
// tuning is refused with errFranzSetting, naming it.
func FranzConnection(settings map[string]string) ([]kgo.Opt, error) {
	for k := range settings {
		tuning := slices.ContainsFunc(tuningPrefixes, func(p string) bool { return strings.HasPrefix(k, p) })
		if !tuning && !slices.Contains(connectionKeys, k) {
			return nil, fmt.Errorf("%w: %s", errFranzSetting, k)
		}
	}
	var opts []kgo.Opt
	switch push := settings["enable.metrics.push"]; push {
	case "", "false":
		// As for the librdkafka clients (consumerDefaults): no KIP-714
		// metrics are pushed to the brokers unless asked for. Each push
		// compresses a fresh rollup, and a client that closes sends a
		// last one, which short-lived readers pay for every time.
		opts = append(opts, kgo.DisableClientMetrics())
	case "true":
	default:
		return nil, fmt.Errorf("%w: --kafka enable.metrics.push: want true or false, have %q", ErrInvalidConfig, push)
	}
	if id := settings["client.id"]; id != "" {
		opts = append(opts, kgo.ClientID(id))
	}
	protocol := strings.ToUpper(settings["security.protocol"])
	if protocol == "" {
		protocol = "PLAINTEXT"
	}
	var useTLS, useSASL bool
	switch protocol {
	case "PLAINTEXT":
	case "SSL":
		useTLS = true
	case "SASL_PLAINTEXT":
		useSASL = true
	case "SASL_SSL":
		useTLS, useSASL = true, true
	default:
		return nil, fmt.Errorf("%w: security.protocol=%s", errFranzSetting, settings["security.protocol"])
	}
	if useSASL {
		m, err := franzSASL(settings)
		if err != nil {
			return nil, err
		}
		opts = append(opts, m)
	}
	if useTLS {
		cfg, err := FranzTLS(settings)
		if err != nil {
			return nil, err
		}
		opts = append(opts, kgo.DialTLSConfig(cfg))
	}
	return opts, nil
}

func franzSASL(settings map[string]string) (kgo.Opt, error) {
	mechanism := settings["sasl.mechanisms"]
	if mechanism == "" {
		mechanism = settings["sasl.mechanism"]
	}
	if mechanism == "" {
		mechanism = "GSSAPI" // librdkafka's default
	}
	user, pass := settings["sasl.username"], settings["sasl.password"]
	switch strings.ToUpper(mechanism) {
	case "PLAIN":
		return kgo.SASL(plain.Auth{User: user, Pass: pass}.AsMechanism()), nil
	case "SCRAM-SHA-256":
		return kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha256Mechanism()), nil
	case "SCRAM-SHA-512":
		return kgo.SASL(scram.Auth{User: user, Pass: pass}.AsSha512Mechanism()), nil
	}
	return nil, fmt.Errorf("%w: sasl.mechanism=%s (PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 are carried over)", errFranzSetting, mechanism)
}

func FranzTLS(settings map[string]string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if path := settings["ssl.ca.location"]; path != "" {
		pem, err := os.ReadFile(path)
		if err != nil {
			return nil, fmt.Errorf("ssl.ca.location: %w", err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("ssl.ca.location %s: no PEM certificate in it", path)
		}
	}
	certPath, keyPath := settings["ssl.certificate.location"], settings["ssl.key.location"]
	if (certPath == "") != (keyPath == "") {
		return nil, errors.New("ssl.certificate.location and ssl.key.location go together")
	}
	if certPath != "" {
		pair, err := tls.LoadX509KeyPair(certPath, keyPath)
		if err != nil {
			return nil, fmt.Errorf("client certificate: %w", err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	switch strings.ToLower(settings["enable.ssl.certificate.verification"]) {
	case "", "true":
	case "false":
		cfg.InsecureSkipVerify = true
		return cfg, nil
	default:
		return nil, fmt.Errorf("%w: enable.ssl.certificate.verification=%s", errFranzSetting, settings["enable.ssl.certificate.verification"])
	}
	switch strings.ToLower(settings["ssl.endpoint.identification.algorithm"]) {
	case "", "https":
	case "none":
		// The chain is verified, the host name is not.
		roots := cfg.RootCAs
		cfg.InsecureSkipVerify = true
		cfg.VerifyConnection = func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return errors.New("the broker sent no certificate")
			}
			vo := x509.VerifyOptions{Roots: roots, Intermediates: x509.NewCertPool()}
			for _, c := range cs.PeerCertificates[1:] {
				vo.Intermediates.AddCert(c)
			}
			_, err := cs.PeerCertificates[0].Verify(vo)
			return err
		}
	default:
		return nil, fmt.Errorf("%w: ssl.endpoint.identification.algorithm=%s", errFranzSetting, settings["ssl.endpoint.identification.algorithm"])
	}
	return cfg, nil
}

// franzSetting is a librdkafka setting the franz transport follows, for
// the clients of one role, with franz-go's option for a value.
type franzSetting struct {
	role clientRole
	opt  func(v string) (kgo.Opt, error)
}

func franzMillis(f func(time.Duration) kgo.Opt) func(string) (kgo.Opt, error) {
	return func(v string) (kgo.Opt, error) {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("want milliseconds, have %q", v)
		}
		return f(time.Duration(n) * time.Millisecond), nil
	}
}

func franzBytes[O kgo.Opt](f func(int32) O) func(string) (kgo.Opt, error) {
	return func(v string) (kgo.Opt, error) {
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("want a positive number, have %q", v)
		}
		return f(int32(n)), nil
	}
}

// franzSettings are the librdkafka tuning settings the franz transport
// carries over to franz-go's options; franzConnection handles how to
// connect.
var franzSettings = map[string]franzSetting{
	"fetch.wait.max.ms":         {consumerRole, franzMillis(func(d time.Duration) kgo.Opt { return kgo.FetchMaxWait(d) })},
	"fetch.max.bytes":           {consumerRole, franzBytes(kgo.FetchMaxBytes)},
	"max.partition.fetch.bytes": {consumerRole, franzBytes(kgo.FetchMaxPartitionBytes)},
	"fetch.min.bytes":           {consumerRole, franzBytes(kgo.FetchMinBytes)},
	"session.timeout.ms":        {consumerRole, franzMillis(func(d time.Duration) kgo.Opt { return kgo.SessionTimeout(d) })},
	"heartbeat.interval.ms":     {consumerRole, franzMillis(func(d time.Duration) kgo.Opt { return kgo.HeartbeatInterval(d) })},
	"client.rack":               {consumerRole, func(v string) (kgo.Opt, error) { return kgo.Rack(v), nil }},
	"linger.ms":                 {producerRole, franzMillis(func(d time.Duration) kgo.Opt { return kgo.ProducerLinger(d) })},
	"batch.size":                {producerRole, franzBytes(kgo.ProducerBatchMaxBytes)},
	"message.max.bytes":         {producerRole, franzBytes(kgo.ProducerBatchMaxBytes)},
	"transaction.timeout.ms":    {producerRole, franzMillis(func(d time.Duration) kgo.Opt { return kgo.TransactionTimeout(d) })},
	"message.timeout.ms":        {producerRole, franzMillis(func(d time.Duration) kgo.Opt { return kgo.RecordDeliveryTimeout(d) })},
	"delivery.timeout.ms":       {producerRole, franzMillis(func(d time.Duration) kgo.Opt { return kgo.RecordDeliveryTimeout(d) })},
	"queue.buffering.max.messages": {producerRole, func(v string) (kgo.Opt, error) {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("want a positive number, have %q", v)
		}
		return kgo.MaxBufferedRecords(n), nil
	}},
	"compression.type":  {producerRole, franzCompression},
	"compression.codec": {producerRole, franzCompression},
}

func franzCompression(v string) (kgo.Opt, error) {
	codecs := map[string]kgo.CompressionCodec{"none": kgo.NoCompression(), "gzip": kgo.GzipCompression(),
		"snappy": kgo.SnappyCompression(), "lz4": kgo.Lz4Compression(), "zstd": kgo.ZstdCompression()}
	c, ok := codecs[v]
	if !ok {
		return nil, fmt.Errorf("want none, gzip, snappy, lz4 or zstd, have %q", v)
	}
	return kgo.ProducerBatchCompression(c), nil
}

// franzTuning returns the franz-go options for the tuning settings among
// settings that apply to clients of role. A setting that is neither a
// connection setting (franzConnection) nor one franzSettings knows is
// refused, naming it: the franz transport does not quietly drop what
// librdkafka would have followed.
func franzTuning(settings map[string]string, role clientRole) ([]kgo.Opt, error) {
	var opts []kgo.Opt
	for _, k := range slices.Sorted(maps.Keys(settings)) {
		if slices.Contains(connectionKeys, k) {
			continue
		}
		s, ok := franzSettings[k]
		if !ok {
			return nil, fmt.Errorf("%w: --kafka %s: the franz client has no counterpart of this librdkafka setting (it follows %s, "+
				"and the connection settings)", ErrInvalidConfig, k, strings.Join(slices.Sorted(maps.Keys(franzSettings)), ", "))
		}
		if s.role != role {
			continue
		}
		opt, err := s.opt(settings[k])
		if err != nil {
			return nil, fmt.Errorf("%w: --kafka %s: %w", ErrInvalidConfig, k, err)
		}
		opts = append(opts, opt)
	}
	return opts, nil
}

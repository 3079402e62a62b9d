// Package reach is the start-up check every kind of worker makes before
// it uses the cluster: ask for its metadata until it answers, with
// backoff and a bound, logging each failure with the address and the
// cause, and refuse at once what asking again will not change (refused
// credentials, a broker certificate that does not verify). Both clients
// then behave alike when the cluster is down, not up yet, or the address
// is wrong.
package reach

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/causeway-stream/causeway/runtime/internal/transport"
	"go.uber.org/zap"
)

// ErrUnreachable is returned by Cluster when the cluster did not answer
// within its bound, or refused for good; the error names the bootstrap
// servers and the last cause. The workers export it under their own
// names (runtime.ErrUnreachable and the like): one value.
var ErrUnreachable = errors.New("cannot reach Kafka")

// DefaultTimeout is the workers' default bound (their ConnectTimeout).
const DefaultTimeout = 30 * time.Second

// reachBackoff is the first wait between attempts to reach the cluster,
// doubled after each up to reachBackoffMax.
const (
	reachBackoff    = 250 * time.Millisecond
	reachBackoffMax = 5 * time.Second
	// reachAttemptMax bounds one attempt, so that a client that waits
	// long on its own leaves room for the next.
	reachAttemptMax = 10 * time.Second
)

// Cluster asks the cluster for its metadata through admin until it
// answers, with backoff, for at most bound: both clients then behave
// alike when the cluster is down or not up yet, or the address is wrong.
// Each failed attempt is logged with the address and the cause; settings
// are the worker's client settings (its TLS ones checked here too).
func Cluster(ctx context.Context, admin transport.Admin, bootstrap string, settings map[string]string, bound time.Duration, log *zap.Logger) error {
	start := time.Now()
	deadline := start.Add(bound)
	wait := reachBackoff
	for attempt := 1; ; attempt++ {
		// Each attempt has a second at least, the last one too.
		now := time.Now()
		until := minTime(deadline, now.Add(reachAttemptMax))
		if until.Before(now.Add(time.Second)) {
			until = now.Add(time.Second)
		}
		err := attemptReach(ctx, admin, bootstrap, settings, until)
		if err == nil {
			if attempt > 1 {
				log.Info("reached Kafka", zap.String("bootstrap_servers", bootstrap), zap.Int("attempts", attempt),
					zap.Duration("after", time.Since(start).Round(time.Millisecond)))
			}
			return nil
		}
		cause := err.Error()
		if transport.Classify(err) == transport.ClassFatal {
			// Refused credentials or authorization, or a certificate that
			// does not verify: asking again will not change the answer.
			return fmt.Errorf("%w at %s: %w", ErrUnreachable, bootstrap, err)
		}
		left := time.Until(deadline)
		if left <= 0 || ctx.Err() != nil {
			return fmt.Errorf("%w at %s within %v (%d attempts): %v", ErrUnreachable, bootstrap, bound, attempt, cause)
		}
		wait = min(wait, left)
		log.Warn("Kafka not reachable yet; retrying", zap.String("bootstrap_servers", bootstrap), zap.Int("attempt", attempt),
			zap.String("cause", cause), zap.Duration("retry_in", wait), zap.Duration("gives_up_in", left.Round(time.Second)))
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%w at %s (%d attempts): %v", ErrUnreachable, bootstrap, attempt, cause)
		}
		wait = min(2*wait, reachBackoffMax)
	}
}

// attemptReach is one attempt: a TCP connection to a bootstrap server
// (and, on a TLS listener, a TLS handshake with the settings' authority),
// then the client's metadata request. The first steps make a cluster that
// is not listening, or one whose certificate does not verify, fail at
// once and alike on both clients, naming the address and the cause
// (librdkafka would wait out its timeout and then name neither).
func attemptReach(ctx context.Context, admin transport.Admin, bootstrap string, settings map[string]string, deadline time.Time) error {
	var refused []string
	untrusted := false
	for _, addr := range strings.Split(bootstrap, ",") {
		addr = strings.TrimSpace(addr)
		conn, err := net.DialTimeout("tcp", addr, time.Until(deadline))
		if err == nil {
			err = handshake(conn, addr, settings, deadline)
			conn.Close()
		}
		if err == nil {
			refused = nil
			break
		}
		var verify *tls.CertificateVerificationError
		untrusted = untrusted || errors.As(err, &verify)
		refused = append(refused, err.Error())
	}
	switch {
	case len(refused) > 0 && untrusted:
		// A certificate that does not verify with the settings' authority
		// will not verify on the next attempt either: refused at once, as
		// Kafka's Java clients refuse a failed SSL handshake.
		return &transport.ClientError{Class: transport.ClassFatal, Err: errors.New(strings.Join(refused, "; "))}
	case len(refused) > 0:
		return errors.New(strings.Join(refused, "; "))
	}
	actx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	_, err := admin.PartitionCounts(actx)
	return err
}

// handshake checks, on a connection to a TLS listener (security.protocol
// SSL or SASL_SSL), that the broker's certificate verifies with the
// settings' authority, as the clients will check it.
func handshake(conn net.Conn, addr string, settings map[string]string, deadline time.Time) error {
	switch strings.ToUpper(settings["security.protocol"]) {
	case "SSL", "SASL_SSL":
	default:
		return nil
	}
	if _, err := transport.FranzConnection(settings); err != nil {
		// Settings only librdkafka follows (an inline PEM, a keystore):
		// its own request decides.
		return nil
	}
	cfg, err := transport.FranzTLS(settings)
	if err != nil {
		return fmt.Errorf("TLS settings: %w", err)
	}
	if host, _, err := net.SplitHostPort(addr); err == nil && cfg.ServerName == "" {
		cfg.ServerName = host
	}
	if err := conn.SetDeadline(deadline); err != nil {
		return err
	}
	if err := tls.Client(conn, cfg).Handshake(); err != nil {
		return fmt.Errorf("TLS handshake with %s: %w", addr, err)
	}
	return nil
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

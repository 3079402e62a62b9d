package runtime_test

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/causeway-stream/causeway/runtime"
	"github.com/causeway-stream/causeway/runtime/embedded"
)

// testCA is a certificate authority made for one test, and a server
// certificate it signed for 127.0.0.1.
type testCA struct {
	pool   *x509.CertPool
	caFile string // the authority's certificate, PEM
	server tls.Certificate
}

func newTestCA(t *testing.T) testCA {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "causeway test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	require.NoError(t, err)
	ca, err := x509.ParseCertificate(caDER)
	require.NoError(t, err)

	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	require.NoError(t, err)

	caFile := filepath.Join(t.TempDir(), "ca.pem")
	require.NoError(t, os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}), 0o600))
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	return testCA{pool: pool, caFile: caFile, server: tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}}
}

// A cluster that speaks only TLS: the worker verifies the broker with the
// authority given in ssl.ca.location, on either client.
func TestWorkerOnATLSCluster(t *testing.T) {
	t.Parallel()
	eachClient(t, func(t *testing.T, client string) {
		ca := newTestCA(t)
		b := startBroker(t, embedded.KfakeOpts(kfake.TLS(&tls.Config{Certificates: []tls.Certificate{ca.server}, MinVersion: tls.VersionTLS12})))
		settings := map[string]string{"security.protocol": "SSL", "ssl.ca.location": ca.caFile}
		runShopOnASecuredCluster(t, client, b.Addr(), settings, kgo.DialTLSConfig(&tls.Config{RootCAs: ca.pool, MinVersion: tls.VersionTLS12}))
	})
}

// A broker whose certificate another authority signed is refused: the
// worker does not start. (Beside TestWorkerOnATLSCluster, which differs
// only in the authority, it shows the verification is what refuses.)
func TestWorkerRefusesABrokerItCannotVerify(t *testing.T) {
	t.Parallel()
	eachClient(t, func(t *testing.T, client string) {
		ca, other := newTestCA(t), newTestCA(t)
		b := startBroker(t, embedded.KfakeOpts(kfake.TLS(&tls.Config{Certificates: []tls.Certificate{ca.server}, MinVersion: tls.VersionTLS12})))
		cfg := testConfigFor(t, client, b.Addr(), "tls-unverified")
		cfg.CreateTopics = true
		cfg.Kafka = map[string]string{"security.protocol": "SSL", "ssl.ca.location": other.caFile}
		// The refusal comes at the first handshake that completes, not at
		// the bound: a certificate that does not verify is not retried.
		cfg.ConnectTimeout = time.Minute
		w, err := runtime.NewStreamThread(cfg, globalShop(t), nil, nil)
		require.NoError(t, err)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		err = w.Start(ctx)
		// Both clients name the broker and why it is refused.
		require.ErrorIs(t, err, runtime.ErrKafkaUnreachable)
		require.ErrorContains(t, err, "TLS handshake with "+b.Addr())
		require.ErrorContains(t, err, "certificate signed by unknown authority")
		// At the first answer: retried, it would end at the bound with
		// the count of attempts.
		require.NotContains(t, err.Error(), "attempts")
	})
}

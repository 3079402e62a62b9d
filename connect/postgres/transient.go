package postgres

import (
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/causeway-stream/causeway/connect"
)

// transientCodes are the SQLSTATE classes and codes of errors that may
// pass: connection exceptions (08), insufficient resources (53), the
// server shutting down or starting (57P01-57P03), and the failures a
// transaction tried again may not meet (40001 serialization, 40P01
// deadlock).
var transientCodes = []string{"08", "53", "57P01", "57P02", "57P03", "40001", "40P01"}

// transient marks err as a connect.RetriableError when the database may
// answer the same request later: one of transientCodes, or the
// connection lost, refused or timed out. A position moved by another
// task (connect.ErrFenced) and the caller's cancellation never are.
func transient(err error) error {
	if err == nil || connect.IsRetriable(err) || errors.Is(err, connect.ErrFenced) || errors.Is(err, context.Canceled) {
		return err
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		for _, c := range transientCodes {
			if strings.HasPrefix(pgErr.Code, c) {
				return &connect.RetriableError{Err: err}
			}
		}
		return err
	}
	var connectErr *pgconn.ConnectError
	var netErr net.Error
	switch {
	case errors.As(err, &connectErr), errors.As(err, &netErr), pgconn.SafeToRetry(err), pgconn.Timeout(err),
		errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, net.ErrClosed), errors.Is(err, pgconn.ErrConnClosed):
		return &connect.RetriableError{Err: err}
	}
	return err
}

// Package pgtest starts a real PostgreSQL server for tests and demos:
// Debian's postgresql package, a cluster made with initdb in a temporary
// directory (in memory, on Linux, when /dev/shm has room), listening on
// 127.0.0.1 on a free port, with trust authentication. Postgres refuses
// to run as root; as root, the cluster belongs to, and runs as, the
// postgres user the package made.
package pgtest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"go.uber.org/goleak"

	"github.com/causeway-stream/causeway/internal/testport"
)

// ErrNoPostgres is returned when no PostgreSQL server binaries are found.
var ErrNoPostgres = errors.New("no PostgreSQL server found (apt-get install postgresql, or make postgres)")

// Cluster is a running server.
type Cluster struct {
	dir  string
	bin  string
	port int
	// as is the user the server runs as ("" for the current one).
	as string
	// Log is the server's log file.
	Log string
	// settings are the server settings the options added.
	settings []string
	// held is the port start chose, until the server binds it.
	held *testport.Held
}

// Option is a setting of a cluster Start makes.
type Option func(*Cluster)

// Logical makes a cluster that can serve logical replication:
// wal_level=logical, with room for ten replication slots and senders.
func Logical() Option {
	return func(c *Cluster) {
		c.settings = append(c.settings, "wal_level=logical", "max_replication_slots=10", "max_wal_senders=10")
	}
}

// Setting sets one server setting, name=value, as postgres -c does.
func Setting(nameValue string) Option {
	return func(c *Cluster) { c.settings = append(c.settings, nameValue) }
}

// bindir finds initdb and postgres: beside pg_ctl on the PATH, else the
// newest of Debian's /usr/lib/postgresql/<version>/bin.
func bindir() (string, error) {
	if p, err := exec.LookPath("pg_ctl"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil {
			return filepath.Dir(real), nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d, nil
		}
	}
	return "", ErrNoPostgres
}

func version(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

// Start makes a cluster in a new temporary directory (in clustersDir),
// with opts, and starts it. Stop it with Stop, which removes the
// directory.
func Start(ctx context.Context, opts ...Option) (*Cluster, error) {
	bin, err := bindir()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp(clustersDir(), "causeway-pg-")
	if err != nil {
		return nil, err
	}
	c := &Cluster{dir: dir, bin: bin, Log: filepath.Join(dir, "postgres.log")}
	for _, o := range opts {
		o(c)
	}
	if os.Geteuid() == 0 {
		c.as = "postgres"
		if err := c.giveTo(c.as); err != nil {
			_ = os.RemoveAll(dir)
			return nil, err
		}
	}
	if err := c.start(ctx); err != nil {
		log, _ := os.ReadFile(c.Log)
		_ = c.Stop()
		return nil, fmt.Errorf("%w\n%s", err, log)
	}
	return c, nil
}

// giveTo makes the cluster's directory the user's.
func (c *Cluster) giveTo(name string) error {
	u, err := user.Lookup(name)
	if err != nil {
		return fmt.Errorf("postgres will not run as root, and there is no user %q to run it as: %w", name, err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return os.Chown(c.dir, uid, gid)
}

// command runs a server binary as the cluster's user.
func (c *Cluster) command(ctx context.Context, name string, args ...string) *exec.Cmd {
	path := filepath.Join(c.bin, name)
	if c.as == "" {
		return exec.CommandContext(ctx, path, args...)
	}
	return exec.CommandContext(ctx, "runuser", append([]string{"-u", c.as, "--", path}, args...)...)
}

func (c *Cluster) start(ctx context.Context) error {
	data := filepath.Join(c.dir, "data")
	if out, err := c.command(ctx, "initdb", "-D", data, "-U", "postgres", "--auth=trust", "--no-sync", "-E", "UTF8", "--locale=C").CombinedOutput(); err != nil {
		return fmt.Errorf("initdb: %w: %s", err, out)
	}
	// The port is held until the server binds it (Resume lets it go just
	// before); should another listener still take it in between, another.
	for attempt := 1; ; attempt++ {
		h, err := testport.Hold(0)
		if err != nil {
			return err
		}
		c.port, c.held = h.Port, h
		_ = os.Truncate(c.Log, 0) // what portTaken reads is this start's
		err = c.Resume(ctx)
		if err == nil || attempt == 5 || !c.portTaken() {
			return err
		}
	}
}

// portTaken reports whether the server's log says its last start found
// its port in use.
func (c *Cluster) portTaken() bool {
	log, err := os.ReadFile(c.Log)
	return err == nil && strings.Contains(string(log), "Address already in use")
}

// Resume starts the server of a cluster that Pause stopped, on the same
// port and data.
func (c *Cluster) Resume(ctx context.Context) error {
	opts := fmt.Sprintf("-c listen_addresses=127.0.0.1 -p %d -k %s -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200", c.port, c.dir)
	for _, nv := range c.settings {
		opts += " -c " + nv
	}
	c.releasePort()
	if out, err := c.command(ctx, "pg_ctl", "start", "-w", "-t", "60", "-D", filepath.Join(c.dir, "data"), "-l", c.Log, "-o", opts).CombinedOutput(); err != nil {
		return fmt.Errorf("pg_ctl start: %w: %s", err, out)
	}
	return nil
}

// Pause stops the server as an outage would (fast shutdown: sessions are
// cut, open transactions rolled back), keeping its data for Resume.
func (c *Cluster) Pause(ctx context.Context) error {
	if out, err := c.command(ctx, "pg_ctl", "stop", "-m", "fast", "-w", "-D", filepath.Join(c.dir, "data")).CombinedOutput(); err != nil {
		return fmt.Errorf("pg_ctl stop: %w: %s", err, out)
	}
	// Its port is not held while it is down: the connections it just
	// closed, in TIME_WAIT, keep a socket without SO_REUSEADDR from
	// binding it, and one with it would not keep other listeners off.
	return nil
}

// releasePort lets go of the port start held for the server.
func (c *Cluster) releasePort() {
	if c.held != nil {
		c.held.Release()
		c.held = nil
	}
}

// URL is the connection URL of database db.
func (c *Cluster) URL(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", c.port, db)
}

// CreateDatabase makes a new database and returns its URL.
func (c *Cluster) CreateDatabase(ctx context.Context, name string) (string, error) {
	conn, err := pgx.Connect(ctx, c.URL("postgres"))
	if err != nil {
		return "", err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", fmt.Errorf("create database %s: %w", name, err)
	}
	return c.URL(name), nil
}

// CreateDatabaseWith makes a new database, runs schema (SQL statements)
// in it, and returns its URL.
func (c *Cluster) CreateDatabaseWith(ctx context.Context, name, schema string) (string, error) {
	url, err := c.CreateDatabase(ctx, name)
	if err != nil {
		return "", err
	}
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return "", err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, schema); err != nil {
		return "", fmt.Errorf("schema of %s: %w", name, err)
	}
	return url, nil
}

// Stop stops the server at once and removes its directory.
func (c *Cluster) Stop() error {
	c.releasePort()
	var err error
	if c.port != 0 {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cmd := c.command(ctx, "pg_ctl", "stop", "-m", "immediate", "-w", "-D", filepath.Join(c.dir, "data"))
		if out, serr := cmd.CombinedOutput(); serr != nil && !strings.Contains(string(out), "not running") {
			err = fmt.Errorf("pg_ctl stop: %w: %s", serr, out)
		}
	}
	return errors.Join(err, os.RemoveAll(c.dir))
}

// Main is a test binary's TestMain for tests on a real Postgres: it
// starts a server with opts into *c, runs the tests, stops the server, and, when
// they passed, checks that no goroutine outlives them (librdkafka's event
// poller aside, which its handles stop on their own). It returns the exit
// code.
func Main(m interface{ Run() int }, c **Cluster, opts ...Option) int {
	var err error
	if *c, err = Start(context.Background(), opts...); err != nil {
		fmt.Fprintln(os.Stderr, "start postgres:", err)
		return 1
	}
	code := m.Run()
	if err := (*c).Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stop postgres:", err)
	}
	if code == 0 {
		if err := goleak.Find(goleak.IgnoreAnyFunction("github.com/confluentinc/confluent-kafka-go/v2/kafka.(*handle).eventPoll")); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	return code
}

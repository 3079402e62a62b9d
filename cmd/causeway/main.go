// Command causeway is the operator's tool for a running worker: it reads
// the worker's status and restarts a failed task or moves it past the
// record it failed on, through the worker's HTTP endpoints. It also runs
// a connect worker.
//
//	causeway [-worker 127.0.0.1:8080] [-token TOKEN] status
//	causeway [-worker ...] restart TASK    # rebuild a failed task from its committed state
//	causeway [-worker ...] skip TASK       # dead-letter the record it failed on, and go on
//	causeway connect --bootstrap-servers HOST:PORT [flags]  # run a connect worker
//
// TASK is "processor/partition", as /status names it. The token (also
// CAUSEWAY_ADMIN_TOKEN) is the worker's --admin-token, when it has one.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"text/tabwriter"
	"time"
)

func main() {
	os.Exit(run(context.Background(), os.Args[1:], os.Getenv, os.Stdout, os.Stderr))
}

const usage = `Usage: causeway [flags] status | restart TASK | skip TASK
       causeway connect --bootstrap-servers HOST:PORT [flags]

  status        the worker's tasks, their states and last errors
  restart TASK  rebuild a failed task from its committed state
  skip TASK     move a failed task past the record it failed on: that record
                goes to the dead-letter topic, and the task goes on after it
  connect       run a connect worker (causeway connect --help)

Flags:
`

// taskStatus and status are the parts of the worker's /status this tool
// prints.
type taskStatus struct {
	ID        string `json:"id"`
	State     string `json:"state"`
	Held      int    `json:"held"`
	LastError string `json:"last_error"`
}

type status struct {
	ApplicationID   string       `json:"application_id"`
	InstanceID      string       `json:"instance_id"`
	Ready           bool         `json:"ready"`
	Error           string       `json:"error"`
	FailedCommits   int          `json:"failed_commits"`
	LastCommitError string       `json:"last_commit_error"`
	Tasks           []taskStatus `json:"tasks"`
}

func run(ctx context.Context, args []string, env func(string) string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "connect" {
		return runConnect(ctx, args[1:], env, stderr)
	}
	fs := flag.NewFlagSet("causeway", flag.ContinueOnError)
	fs.SetOutput(stderr)
	worker := fs.String("worker", "127.0.0.1:8080", "the worker's HTTP address (its --http-addr)")
	token := fs.String("token", env("CAUSEWAY_ADMIN_TOKEN"), "the worker's admin token, for restart and skip")
	timeout := fs.Duration("timeout", time.Minute, "how long to wait for the worker")
	fs.Usage = func() {
		fmt.Fprint(stderr, usage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	base := "http://" + strings.TrimPrefix(*worker, "http://")
	switch cmd := fs.Arg(0); {
	case cmd == "status" && fs.NArg() == 1:
		return printStatus(ctx, base, stdout, stderr)
	case (cmd == "restart" || cmd == "skip") && fs.NArg() == 2:
		return post(ctx, base+"/tasks/"+fs.Arg(1)+"/"+cmd, *token, stdout, stderr)
	default:
		fs.Usage()
		return 2
	}
}

func printStatus(ctx context.Context, base string, stdout, stderr io.Writer) int {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/status", nil)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	defer resp.Body.Close()
	var st status
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		fmt.Fprintf(stderr, "read status: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "application %s, instance %s, ready %v\n", st.ApplicationID, st.InstanceID, st.Ready)
	if st.Error != "" {
		fmt.Fprintf(stdout, "stopped: %s\n", st.Error)
	}
	if st.FailedCommits > 0 {
		fmt.Fprintf(stdout, "%d transactions failed in a row; the last: %s\n", st.FailedCommits, st.LastCommitError)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "TASK\tSTATE\tHELD\tLAST ERROR")
	for _, t := range st.Tasks {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", t.ID, t.State, t.Held, t.LastError)
	}
	if err := tw.Flush(); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	return 0
}

func post(ctx context.Context, url, token string, stdout, stderr io.Writer) int {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, nil)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 2
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	if resp.StatusCode >= 300 {
		fmt.Fprintf(stderr, "%s: %s", resp.Status, body)
		return 1
	}
	fmt.Fprint(stdout, string(body))
	return 0
}

// Command broker runs Causeway's embedded Kafka-protocol broker (franz-go's
// kfake) on its own, so that several worker processes and ordinary Kafka
// clients can share it:
//
//	go run ./cmd/broker --port 9092 --data-dir ./broker-data
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/causeway-stream/causeway/runtime/embedded"
)

func main() {
	port := flag.Int("port", 9092, "port to listen on, on localhost")
	dir := flag.String("data-dir", "causeway-broker", "directory that keeps the data across restarts; empty keeps it in memory")
	flag.Parse()
	opts := []embedded.Opt{embedded.Port(*port)}
	if *dir != "" {
		opts = append(opts, embedded.DataDir(*dir))
	}
	b, err := embedded.Start(opts...)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("embedded broker listening on %s (data: %q); stop with Ctrl-C\n", b.Addr(), *dir)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	<-sig
	b.Close()
}

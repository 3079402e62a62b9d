// Command wordcount is a Causeway worker that counts words.
//
// As a worker, against a Kafka cluster or (with no --bootstrap-servers) the
// embedded broker:
//
//	wordcount --application-id wordcount --bootstrap-servers broker:9092
//
// As a self-contained demo (what `make run` does): start the embedded
// broker, feed it the bundled text, count, print the top words, and exit:
//
//	wordcount demo
package main

import "github.com/causeway-stream/causeway/examples/internal/demoworker"

func main() { demoworker.Main(Topology, demo) }
